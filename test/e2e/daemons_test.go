package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestTwoDaemons: beside a daemon A serving a pool and a user sandbox, a
// daemon B on another data dir (its run dir derived from it, as a second
// daemon given only --data-dir gets) creates a sandbox, is killed with
// SIGKILL, starts again and stops; A's sandboxes, pool and socket work
// throughout, and no two sandboxes share a user id range. A daemon on A's
// data dir, or on A's run dir, refuses to start and says whose it is.
func TestTwoDaemons(t *testing.T) {
	t.Parallel()
	a := startDaemonWith(t, "--pool", "host=1")
	sbA := a.create(client.CreateSandboxRequest{Runtime: "runc"})
	if res := a.exec(sbA.ID, "echo kept > a.txt"); res.ExitCode != 0 {
		t.Fatalf("write in A's sandbox: %+v", res)
	}
	waitPoolReady(t, a, 1)
	sock := filepath.Join(a.runDir, "hutch.sock")
	sockBefore := inode(t, sock)
	viaSocket, err := client.New("unix://"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	checkA := func(step string) {
		t.Helper()
		if res := a.exec(sbA.ID, "cat a.txt"); res.ExitCode != 0 || res.Stdout != "kept\n" {
			t.Errorf("%s: A's sandbox: %+v", step, res)
		}
		if inode(t, sock) != sockBefore {
			t.Errorf("%s: A's socket was replaced or removed", step)
		}
		h, err := viaSocket.Health(t.Context())
		if err != nil {
			t.Errorf("%s: A through its socket: %v", step, err)
			return
		}
		if len(h.Pools) != 1 || h.Pools[0].Ready != 1 {
			t.Errorf("%s: A's pool: %+v, want one ready", step, h.Pools)
		}
	}

	// A second daemon on A's data dir, then on A's run dir: refused,
	// leaving nothing (the run dir it would derive is not made).
	other := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"A's data dir", []string{"--data-dir", a.dataDir}, "in use by another hutch daemon (pid " + strconv.Itoa(a.cmd.Process.Pid) + ")"},
		{"A's run dir", []string{"--data-dir", filepath.Join(other, "data"), "--run-dir", a.runDir}, "belongs to the daemon of data dir " + a.dataDir},
	} {
		cmd := exec.CommandContext(t.Context(), hutchBin, append([]string{"serve", "--listen", freeAddr(t), "--e2b-listen", "", "--pool", "host=0"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v, output %q; want a refusal saying %q", tc.name, err, out, tc.want)
		}
	}
	if _, err := os.Stat(derivedRunDir(a.dataDir)); err == nil {
		t.Errorf("the refused daemon made a run dir")
	}
	checkA("after the refusals")

	b := newDaemon(t, "--pool", "host=0")
	b.derivedRunDir = true
	b.start()
	checkA("after B started")
	sbB := b.create(client.CreateSandboxRequest{Runtime: "runc"})
	if res := b.exec(sbB.ID, "echo b > b.txt"); res.ExitCode != 0 {
		t.Fatalf("write in B's sandbox: %+v", res)
	}
	checkA("after B created")
	b.kill()
	checkA("after B was killed")
	b.start()
	if res := b.exec(sbB.ID, "cat b.txt"); res.Stdout != "b\n" {
		t.Errorf("B's sandbox after B's restart: %+v", res)
	}
	checkA("after B started again")

	// Every sandbox has a range of its own: A's, A's pool's (taken by a
	// create), and B's.
	pooled := a.create(client.CreateSandboxRequest{Template: "host", Runtime: "runc"})
	bases := map[string]string{}
	for _, s := range []struct {
		d  *daemon
		id string
	}{{a, sbA.ID}, {a, pooled.ID}, {b, sbB.ID}} {
		res := s.d.exec(s.id, "cat /proc/self/uid_map")
		f := strings.Fields(res.Stdout)
		if len(f) != 3 {
			t.Fatalf("uid_map of %s: %+v", s.id, res)
		}
		if other, dup := bases[f[1]]; dup {
			t.Errorf("sandboxes %s and %s share host ids from %s", other, s.id, f[1])
		}
		bases[f[1]] = s.id
	}
	if err := a.client.DeleteSandbox(t.Context(), pooled.ID); err != nil {
		t.Fatal(err)
	}
	waitPoolReady(t, a, 1)

	b.stop()
	checkA("after B stopped")
}

// waitPoolReady waits until d's one pool has n sandboxes ready.
func waitPoolReady(t *testing.T, d *daemon, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h, err := d.client.Health(t.Context())
		if err == nil && len(h.Pools) == 1 && h.Pools[0].Ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool not %d ready: %+v %v", n, h, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
