package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/timerslack"
)

// waitZombie waits until pid is a zombie.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if e, ok := readProcStat(pid); ok && e.state == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not become a zombie", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitNoProc(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d was not reaped", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// The reaper reaps children it did not start and leaves the exit status of
// those it did (shims) to their waiters.
func TestReaperLeavesKnownChildren(t *testing.T) {
	requireRoot(t)
	r := newReaper(Config{}.withDefaults().Logger)
	known, err := r.spawn("/bin/sh", []string{"sh", "-c", "exit 7"}, &syscall.ProcAttr{}, true)
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	waitZombie(t, known)
	waitZombie(t, unknown)
	r.reapOrphans()
	waitNoProc(t, unknown)
	if e, ok := readProcStat(known); !ok || e.state != 'Z' {
		t.Fatal("the reaper reaped a child it started")
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(known, &ws, 0, nil); err != nil || ws.ExitStatus() != 7 {
		t.Errorf("waiting for the known child: %v, status %d", err, ws.ExitStatus())
	}
	r.forget(known)
}

// Orphans re-parented to the agent (as to PID 1; here to a subreaper) are
// reaped on SIGCHLD while commands run normally. (The orphan here is not a
// command's: it counts as part of the direct tree, so the first command's
// slot stays taken until it ends and the others run under shims.)
func TestReaperReapsOrphans(t *testing.T) {
	a := startAgent(t) // reaping orphans, a child subreaper meanwhile

	// sh exits at once, leaving a sleep that is re-parented to this process.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	parent, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 0.2 & echo $!"}, &syscall.ProcAttr{Files: []uintptr{0, w.Fd(), 2}})
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := r.Read(buf)
	_ = r.Close()
	orphan := parsePids(t, string(buf[:n]))
	for range 20 {
		if res := a.run(t, sh("exit 3")); res.end.GetStatus() != "exit status 3" {
			t.Fatalf("end = %v", res.end)
		}
	}
	waitNoProc(t, parent)
	waitNoProc(t, orphan[0])
}

func TestOnlyAgentAndShims(t *testing.T) {
	kids := map[int]bool{32: true, 40: false} // a shim, and the direct command
	for _, tt := range []struct {
		pids []int
		want bool
	}{
		{[]int{1}, true},
		{[]int{1, 32}, true},
		{[]int{1, 32, 40}, false}, // the direct command, not reaped yet
		{[]int{1, 32, 41}, false}, // what it left behind, or a shim's command
		{[]int{41}, false},
	} {
		if got := onlyAgentAndShims(tt.pids, 1, kids); got != tt.want {
			t.Errorf("onlyAgentAndShims(%v) = %v, want %v", tt.pids, got, tt.want)
		}
	}
}

// A fork refused for want of processes (EAGAIN) is tried again until it
// succeeds, for forkWait at most; other failures are not tried again.
func TestRetryFork(t *testing.T) {
	t.Parallel()
	tries, betweens := 0, 0
	pid, err := retryFork(func() (int, error) {
		if tries++; tries < 3 {
			return 0, syscall.EAGAIN
		}
		return 42, nil
	}, func() { betweens++ })
	if pid != 42 || err != nil || tries != 3 || betweens != 2 {
		t.Errorf("EAGAIN twice, then a pid: %d, %v after %d tries and %d rounds between", pid, err, tries, betweens)
	}

	tries = 0
	if _, err := retryFork(func() (int, error) { tries++; return 0, syscall.ENOENT }, nil); !errors.Is(err, syscall.ENOENT) || tries != 1 {
		t.Errorf("ENOENT: %v after %d tries; want it at once", err, tries)
	}

	began := time.Now()
	_, err = retryFork(func() (int, error) { return 0, syscall.EAGAIN }, nil)
	took := time.Since(began)
	if !errors.Is(err, syscall.EAGAIN) || took < forkWait/2 || took > forkWait+time.Second {
		t.Errorf("EAGAIN all along: %v after %v; want EAGAIN after about %v", err, took, forkWait)
	}
	var ce *connect.Error
	if !errors.As(spawnError(connect.CodeUnavailable, fmt.Errorf("start shim: %w", err)), &ce) || ce.Code() != connect.CodeResourceExhausted || !strings.Contains(ce.Message(), "process limit") {
		t.Errorf("the error of EAGAIN: %v; want resource exhausted naming the process limit", ce)
	}
	if !errors.As(spawnError(connect.CodeInvalidArgument, syscall.ENOENT), &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Errorf("the error of ENOENT: %v; want the caller's code", ce)
	}
}

// A command starts with the kernel's timer slack, whatever the agent's
// thread that forks it has (the daemon's coarser one, inherited).
func TestForkExecDefaultSlack(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, timerslack.Daemon, 0, 0, 0); err != nil {
		t.Skipf("no timer slack here: %v", err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, timerslack.Default, 0, 0, 0) }()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pid, err := forkExec("/bin/cat", []string{"cat", "/proc/self/timerslack_ns"}, &syscall.ProcAttr{Files: []uintptr{0, w.Fd(), 2}})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(timerslack.Default) {
		t.Errorf("the command's timer slack: %q, want %d", got, timerslack.Default)
	}
	if v, _ := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); v != timerslack.Daemon {
		t.Errorf("the forking thread's slack after: %d, want its own %d", v, timerslack.Daemon)
	}
}
