package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A daemon killed with SIGKILL in the middle of a command leaves its
// sandboxes running; the next daemon finds them and they answer.
func TestRestartAfterKill(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		d.exec(sb.ID, "echo kept > state.txt")

		// A command that is running when the daemon dies.
		started := make(chan struct{})
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The daemon dies under this call, so it ends in an error.
			_, _ = d.client.ExecStream(ctx, sb.ID, client.ExecRequest{Command: "echo go; sleep 5"}, func(client.ExecEvent) error {
				close(started)
				return nil
			})
		}()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the long command never started")
		}
		d.kill()
		d.start()

		res := d.exec(sb.ID, "cat state.txt")
		if res.Stdout != "kept\n" {
			t.Fatalf("after restart: %+v", res)
		}
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil || got.State != client.StateRunning {
			t.Fatalf("after restart: %+v, %v", got, err)
		}
	})
}

// A sandbox whose container died while the daemon was down is marked and
// cleaned on the next start.
func TestRestartFindsDeadSandbox(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		d.kill()

		// Kill the container's init from the host, as an OOM killer might.
		pid := containerPid(t, d, runtime, sb.ID)
		p, err := os.FindProcess(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)

		d.start()
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != client.StateError || got.StateReason == "" {
			t.Fatalf("dead sandbox after restart = %+v, want state error with a reason", got)
		}
		if _, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{Command: "true"}); err == nil ||
			!strings.Contains(err.Error(), "not running") {
			t.Fatalf("exec in dead sandbox: %v, want a not-running error", err)
		}
		if entries, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes")); len(entries) != 0 {
			t.Fatalf("the dead sandbox's directory is still there")
		}
	})
}

// containerPid asks the runtime for the pid of a sandbox's container: its
// agent with runc, the gVisor sandbox process with gvisor.
func containerPid(t *testing.T, d *daemon, runtime, id string) int {
	t.Helper()
	bin, root := "runc", filepath.Join(d.runDir, "runc")
	if runtime == "gvisor" {
		bin, root = runscBin, filepath.Join(d.runDir, "runsc")
	}
	out, err := exec.Command(bin, "--root", root, "state", "hutch-"+id).Output()
	if err != nil {
		t.Fatalf("%s state %s: %v", bin, id, err)
	}
	var st struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Pid == 0 {
		t.Fatalf("state of %s: %v in %s", id, err, out)
	}
	return st.Pid
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not end", pid)
}
