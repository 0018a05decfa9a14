package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second lock of a data dir is refused, naming the holder's pid, while
// the first is held; once released, it is free again.
func TestLockDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to open files: a second open in this process
	// conflicts as another process's would.
	_, err = lockDataDir(dir)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want a refusal naming pid %d", err, os.Getpid())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// A child forked by a test beside this one holds the lock's file
	// until it execs (its copy of the descriptor closes on exec), so the
	// lock may stay held for that moment after the close.
	var again *os.File
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if again, err = lockDataDir(dir); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}

// The lock is held by another process: the refusal names that process.
func TestLockDataDirOtherProcess(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("needs flock(1) from util-linux")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.lock")
	// flock(1) holds the lock while sleep runs, and the file says its pid.
	holder := exec.Command("flock", "--nonblock", path, "sh", "-c", `echo $$ > "$0"; exec sleep 30`, path)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	var err error
	for range 200 {
		b, _ := os.ReadFile(path)
		if len(b) > 0 {
			_, err = lockDataDir(dir)
			if err != nil {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "in use by another hutch daemon (pid ") || strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("lock held by another process: %v", err)
	}
}

// A run dir is its first data dir's: the same data dir may claim it again,
// another is refused with both named.
func TestClaimRunDir(t *testing.T) {
	t.Parallel()
	run := t.TempDir()
	if err := claimRunDir(run, "/data/a"); err != nil {
		t.Fatal(err)
	}
	if err := claimRunDir(run, "/data/a/"); err != nil {
		t.Fatalf("the same data dir again: %v", err)
	}
	err := claimRunDir(run, "/data/b")
	if err == nil || !strings.Contains(err.Error(), run) || !strings.Contains(err.Error(), "/data/a") {
		t.Fatalf("another data dir: %v, want a refusal naming the run dir and its owner", err)
	}
	if left, _ := filepath.Glob(filepath.Join(run, ".data-dir-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// The default run dir is /run/hutch for the default data dir only; each
// other data dir has one of its own.
func TestRunDirFor(t *testing.T) {
	t.Parallel()
	if got := runDirFor("/var/lib/hutch/"); got != "/run/hutch" {
		t.Errorf("default data dir: %s", got)
	}
	a, b := runDirFor("/srv/a"), runDirFor("/srv/b")
	if a == b || !strings.HasPrefix(a, "/run/hutch-") || a == "/run/hutch" {
		t.Errorf("other data dirs: %s and %s, want two of their own", a, b)
	}
	c := Default()
	c.DataDir = "/srv/a"
	if c.socketPath() != filepath.Join(a, "hutch.sock") || c.stateRoot("runc") != filepath.Join(a, "runc") {
		t.Errorf("paths of a derived run dir: %s %s", c.socketPath(), c.stateRoot("runc"))
	}
}
