package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A sandbox whose runtime process is killed from outside (SIGKILL, as the
// host's OOM killer or an operator would) is marked error within 5 s,
// with the signal named, without any call noticing first; its files are
// kept, and hutch start brings it back with them.
func TestKilledFromOutside(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if res := d.exec(sb.ID, "echo kept > kept.txt && sync"); res.ExitCode != 0 {
			t.Fatalf("write: %+v", res)
		}
		pid := containerPid(t, d, runtime, sb.ID)
		p, err := os.FindProcess(pid)
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		var got *client.Sandbox
		for {
			if got, err = d.client.GetSandbox(t.Context(), sb.ID); err != nil {
				t.Fatal(err)
			}
			if got.State == client.StateError || time.Since(killed) > 5*time.Second {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got.State != client.StateError {
			t.Fatalf("5 s after the kill: %s (%s), want error", got.State, got.StateReason)
		}
		t.Logf("marked after %s: %s", time.Since(killed).Round(time.Millisecond), got.StateReason)
		if !strings.Contains(got.StateReason, "SIGKILL") {
			t.Errorf("reason %q, want the signal named", got.StateReason)
		}
		if out, stderr, code := d.cli("", "start", sb.ID); code != 0 {
			t.Fatalf("hutch start: %d %q %q", code, out, stderr)
		}
		got, _ = d.client.GetSandbox(t.Context(), sb.ID)
		if got.State != client.StateRunning {
			t.Errorf("after hutch start: %s (%s)", got.State, got.StateReason)
		}
		if res := d.exec(sb.ID, "cat kept.txt"); res.Stdout != "kept\n" {
			t.Errorf("the file after the start: %+v", res)
		}
	})
}

// A warm pool's ready sandbox killed from outside is replaced at once:
// the pool's count never promises one that is gone.
func TestPoolSandboxKilledFromOutside(t *testing.T) {
	t.Parallel()
	d := startDaemonWith(t, "--pool", "host=1")
	waitPoolReady(t, d, 1)
	ids := runcContainers(t, d)
	if len(ids) != 1 {
		t.Fatalf("containers of a pool of one: %v", ids)
	}
	pid := containerPid(t, d, "runc", strings.TrimPrefix(ids[0], "hutch-"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		now := runcContainers(t, d)
		h, err := d.client.Health(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(now) == 1 && now[0] != ids[0] && h.Pools[0].Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool after its sandbox was killed: containers %v, %+v", now, h.Pools)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sb := d.create(client.CreateSandboxRequest{Template: "host", Runtime: "runc"})
	if res := d.exec(sb.ID, "echo fine"); res.Stdout != "fine\n" {
		t.Errorf("a sandbox from the replaced pool: %+v", res)
	}
}

// runcContainers lists the daemon's runc containers. runc 1.1's list
// fails when a container's directory goes between its reading the state
// root and its looking at that directory (a sandbox's teardown removes
// it): it is asked again then.
func runcContainers(t *testing.T, d *daemon) []string {
	t.Helper()
	for try := 0; ; try++ {
		var stderr strings.Builder
		cmd := exec.Command("runc", "--root", filepath.Join(d.runDir, "runc"), "list", "--quiet")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil {
			return strings.Fields(string(out))
		}
		if try == 9 || !strings.Contains(stderr.String(), "no such file or directory") {
			t.Fatalf("runc list: %v: %s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
