package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
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

// A sandbox whose container died while the daemon was down is marked
// error on the next start, saying so, and keeps its files: the next call
// starts it again on them.
func TestRestartFindsDeadSandbox(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if res := d.exec(sb.ID, "echo kept > kept.txt && sync"); res.ExitCode != 0 {
			t.Fatalf("write: %+v", res)
		}
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
		// gVisor's runtime may still call the container running: then its
		// agent's silence tells.
		if got.State != client.StateError || !strings.Contains(got.StateReason, "daemon was down") && !strings.Contains(got.StateReason, "after a daemon restart") {
			t.Fatalf("dead sandbox after restart = %+v, want state error saying it stopped while the daemon was down", got)
		}
		if res := d.exec(sb.ID, "cat kept.txt"); res.Stdout != "kept\n" {
			t.Fatalf("exec in the dead sandbox: %+v, want it started again with its file", res)
		}
		got, _ = d.client.GetSandbox(t.Context(), sb.ID)
		if got.State != client.StateRunning || !strings.HasPrefix(got.StateReason, "started again by a call after an error") {
			t.Errorf("after the exec: %s (%s), want running, started again after the error", got.State, got.StateReason)
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

// A daemon killed with SIGKILL in the middle of a suspend, or of a resume,
// leaves after its restart a sandbox that is wholly suspended (never half)
// and that the next call wakes with its files.
func TestKillMidSuspendAndResume(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		d.exec(sb.ID, "echo kept > state.txt")
		for _, step := range []struct {
			name, midway string
			call         func(context.Context, string) (*client.Sandbox, error)
		}{
			{"suspend", client.StateSuspending, d.client.SuspendSandbox},
			{"resume", client.StateResuming, d.client.ResumeSandbox},
		} {
			// The suspend of the resume step, whole.
			if step.name == "resume" {
				if _, err := d.client.SuspendSandbox(t.Context(), sb.ID); err != nil {
					t.Fatal(err)
				}
			}
			if !killDuring(t, d, sb.ID, step.midway, step.call) {
				t.Fatalf("never saw the sandbox %s in 5 tries", step.midway)
			}
			d.start()
			got, err := d.client.GetSandbox(t.Context(), sb.ID)
			if err != nil || got.State != client.StateSuspended {
				t.Fatalf("after a kill mid-%s and a restart: %+v, %v; want suspended", step.name, got, err)
			}
			if res := d.exec(sb.ID, "cat state.txt"); res.Stdout != "kept\n" {
				t.Fatalf("woken after a kill mid-%s: %+v", step.name, res)
			}
		}
	})
}

// killDuring makes call on sandbox id and kills the daemon with SIGKILL as
// soon as the sandbox shows state midway, trying again (with the call
// undone by the next one) until it catches it; it reports whether it did.
// The daemon is left dead.
func killDuring(t *testing.T, d *daemon, id, midway string, call func(context.Context, string) (*client.Sandbox, error)) bool {
	t.Helper()
	for range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = call(ctx, id) // cut short by the kill, or done
		}()
		caught := false
		for !caught {
			select {
			case <-done:
			default:
				sb, err := d.client.GetSandbox(t.Context(), id)
				if err == nil && sb.State == midway {
					d.kill()
					caught = true
				}
				continue
			}
			break
		}
		cancel()
		<-done
		if caught {
			return true
		}
		// Too quick to catch: undo it and try again.
		if midway == client.StateSuspending {
			if _, err := d.client.ResumeSandbox(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		} else if _, err := d.client.SuspendSandbox(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	return false
}

// A daemon killed mid-snapshot leaves a sandbox that runs on after the
// restart: thawed, with its agent listening (under gVisor the agent closes
// its listener while the memory is saved), and its files as they were.
func TestKillMidSnapshot(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		// Many files make the copy, while the sandbox is frozen, long
		// enough to catch.
		d.exec(sb.ID, "echo kept > state.txt && mkdir many && cd many && seq 3000 | xargs touch")
		dir := filepath.Join(d.dataDir, "sandboxes", sb.ID)
		midway := func() bool {
			if _, err := os.Stat(filepath.Join(dir, "snapshotting")); err != nil {
				return false
			}
			if runtime == "gvisor" {
				_, err := os.Stat(filepath.Join(dir, "run", "agent.sock"))
				return errors.Is(err, os.ErrNotExist) // closed for the checkpoint
			}
			state, err := os.ReadFile("/sys/fs/cgroup/freezer/hutch/" + sb.ID + "/freezer.state")
			return err == nil && strings.TrimSpace(string(state)) == "FROZEN"
		}
		caught := false
		for try := 0; try < 5 && !caught; try++ {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = d.client.SnapshotSandbox(t.Context(), sb.ID, fmt.Sprintf("cut-%d", try))
			}()
		poll:
			for !caught {
				select {
				case <-done:
					break poll
				default:
					if midway() {
						d.kill()
						caught = true
					}
				}
			}
			<-done
		}
		if !caught {
			t.Fatal("never caught a snapshot midway in 5 tries")
		}
		d.start()
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil || got.State != client.StateRunning {
			t.Fatalf("after a kill mid-snapshot and a restart: %+v, %v; want running", got, err)
		}
		if res := d.exec(sb.ID, "cat state.txt"); res.Stdout != "kept\n" {
			t.Fatalf("after a kill mid-snapshot: %+v", res)
		}
		if _, err := d.client.SnapshotSandbox(t.Context(), sb.ID, "whole"); err != nil {
			t.Errorf("a snapshot after the restart: %v", err)
		}
	})
}
