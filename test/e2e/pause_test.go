package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestPause freezes a sandbox with the CLI under each runtime: it shows
// paused, the next exec thaws it, and a paused sandbox can be removed.
func TestPause(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if out, stderr, code := d.cli("", "pause", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch pause: %d %q %q", code, out, stderr)
		}
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil || got.State != client.StatePaused || got.StateReason != "paused by request" {
			t.Fatalf("a paused sandbox: %+v, %v", got, err)
		}
		if out, stderr, code := d.cli("", "exec", sb.ID, "--", "echo", "thawed"); code != 0 || out != "thawed\n" {
			t.Fatalf("exec in a paused sandbox: %d %q %q", code, out, stderr)
		}
		if got, _ := d.client.GetSandbox(t.Context(), sb.ID); got.State != client.StateRunning {
			t.Errorf("after the exec: %s, want running", got.State)
		}
		if _, err := d.client.PauseSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "unpause", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch unpause: %d %q %q", code, out, stderr)
		}
		if _, err := d.client.PauseSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "rm", sb.ID); code != 0 || !strings.Contains(out, sb.ID) {
			t.Fatalf("rm of a paused sandbox: %d %q %q", code, out, stderr)
		}
	})
	if _, stderr, code := d.cli("", "pause", "nosuchsandbox"); code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("pause of an unknown sandbox: %d %q", code, stderr)
	}
}

// TestSuspend stops a sandbox with the CLI under each runtime: files and
// installed packages stay, processes go, the next exec resumes it, and a
// suspended sandbox can be removed.
func TestSuspend(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Env: map[string]string{"KEPT": "env"}})
		res := d.exec(sb.ID, `mkdir -p ~/.local/lib && echo pkg > ~/.local/lib/pkg.py && echo work > notes.txt`)
		if res.ExitCode != 0 {
			t.Fatalf("write files: %+v", res)
		}
		if out, stderr, code := d.cli("", "suspend", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch suspend: %d %q %q", code, out, stderr)
		}
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil || got.State != client.StateSuspended {
			t.Fatalf("a suspended sandbox: %+v, %v", got, err)
		}
		if _, err := d.client.Stats(t.Context(), sb.ID); err == nil {
			t.Error("stats of a suspended sandbox answered (and woke it?)")
		}
		res = d.exec(sb.ID, `cat ~/.local/lib/pkg.py notes.txt; echo "$KEPT"`)
		if res.ExitCode != 0 || res.Stdout != "pkg\nwork\nenv\n" {
			t.Fatalf("exec in a suspended sandbox: %+v", res)
		}
		if got, _ := d.client.GetSandbox(t.Context(), sb.ID); got.State != client.StateRunning || got.StateReason != "woken by a call" {
			t.Errorf("after the exec: %s (%s)", got.State, got.StateReason)
		}
		if _, err := d.client.SuspendSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "resume", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch resume: %d %q %q", code, out, stderr)
		}
		if _, err := d.client.SuspendSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "rm", sb.ID); code != 0 || !strings.Contains(out, sb.ID) {
			t.Fatalf("rm of a suspended sandbox: %d %q %q", code, out, stderr)
		}
	})
}

// TestStop stops a sandbox with the CLI under each runtime: its files
// stay, its processes end (under gVisor too: no memory image is kept), an
// exec is refused with how to start it, and hutch start starts it with its
// background process running again.
func TestStop(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if res := d.exec(sb.ID, "echo work > notes.txt"); res.ExitCode != 0 {
			t.Fatalf("write a file: %+v", res)
		}
		// It notes when it started: run again, it notes a later time.
		if _, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "svc", Command: "date +%s%N > /tmp/started; exec sleep 600"}); err != nil {
			t.Fatal(err)
		}
		// started waits up to 2 s for a start time other than last (a
		// read between the file's truncation and its write finds it empty).
		started := func(last string) string {
			var res *client.ExecResult
			for range 100 {
				if res = d.exec(sb.ID, "cat /tmp/started 2>/dev/null"); res.Stdout != last && res.Stdout != "" {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			return res.Stdout
		}
		before := started("")
		if before == "" {
			t.Fatal("the background process never noted its start")
		}
		if out, stderr, code := d.cli("", "stop", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch stop: %d %q %q", code, out, stderr)
		}
		if got, err := d.client.GetSandbox(ctx, sb.ID); err != nil || got.State != client.StateStopped {
			t.Fatalf("a stopped sandbox: %+v, %v", got, err)
		}
		if entries, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes", sb.ID, "checkpoint")); len(entries) > 0 {
			t.Errorf("a stopped sandbox kept a memory image: %d files", len(entries))
		}
		_, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "true"})
		if !client.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "hutch start "+sb.ID) {
			t.Errorf("exec in a stopped sandbox: %v, want failed_precondition saying how to start it", err)
		}
		if out, stderr, code := d.cli("", "start", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch start: %d %q %q", code, out, stderr)
		}
		if res := d.exec(sb.ID, "cat notes.txt"); res.Stdout != "work\n" {
			t.Errorf("after the start: %+v", res)
		}
		procs, err := d.client.ListProcesses(ctx, sb.ID)
		if err != nil || len(procs) != 1 || procs[0].Status != client.ProcessRunning {
			t.Errorf("the background process after the start: %+v, %v", procs, err)
		}
		if after := started(before); after == before {
			t.Errorf("the background process was not started again (started at %s before and after): its memory was kept", before)
		}
	})
}

// TestKey: hutch create --key is get-or-create, and wakes a suspended
// sandbox of its key.
func TestKey(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	first, stderr, code := d.cli("", "create", "--key", "chat-7")
	if code != 0 || first == "" {
		t.Fatalf("create --key: %d %q %q", code, first, stderr)
	}
	id := strings.TrimSpace(first)
	d.sandboxIDs = append(d.sandboxIDs, id) // the harness deletes it
	if _, err := d.client.SuspendSandbox(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	again, stderr, code := d.cli("", "create", "--key", "chat-7")
	if code != 0 || strings.TrimSpace(again) != id {
		t.Fatalf("create --key again: %d %q %q, want %s", code, again, stderr, id)
	}
	sb, err := d.client.GetSandbox(t.Context(), id)
	if err != nil || sb.State != client.StateRunning || sb.Key != "chat-7" {
		t.Errorf("the key's sandbox: %+v, %v", sb, err)
	}
	if out, stderr, code := d.cli("", "keepalive", id, "--idle-timeout", "2h", "--max-lifetime", "48h"); code != 0 || strings.TrimSpace(out) != id {
		t.Errorf("keepalive: %d %q %q", code, out, stderr)
	}
	sb, err = d.client.GetSandbox(t.Context(), id)
	if err != nil || sb.IdleTimeoutS != 7200 {
		t.Errorf("after keepalive: %+v, %v; want idle_timeout_s 7200", sb, err)
	}
	if left := time.Until(sb.ExpiresAt); left < 47*time.Hour || left > 48*time.Hour {
		t.Errorf("after keepalive --max-lifetime 48h: expires in %v", left)
	}
	if _, stderr, code := d.cli("", "run", "--key", "x", "--", "true"); code != 2 || !strings.Contains(stderr, "--key goes with hutch create") {
		t.Errorf("run --key: %d %q", code, stderr)
	}
}

// Under gVisor a suspend keeps memory and processes (checkpoint and
// restore): a Python process holding a value in memory answers with the
// same value after the sandbox was suspended and woken, under the same pid.
func TestSuspendKeepsMemoryUnderGvisor(t *testing.T) {
	t.Parallel()
	if runscBin == "" {
		t.Skip("needs gVisor's runsc (make runsc)")
	}
	d := startDaemon(t)
	sb := d.create(client.CreateSandboxRequest{Runtime: "gvisor"})
	const holder = `import os, signal, time
value = os.urandom(8).hex()
ballast = bytearray(os.urandom(1 << 20)) * 64
def say(*_):
    with open("/home/user/said", "w") as f:
        f.write(value)
signal.signal(signal.SIGUSR1, say)
print(value, flush=True)
while True:
    time.sleep(1)`
	p, err := d.client.StartProcess(t.Context(), sb.ID, client.StartProcessRequest{Name: "holder", Cmd: []string{"python3", "-c", holder}})
	if err != nil {
		t.Fatal(err)
	}
	var value string
	for deadline := time.Now().Add(20 * time.Second); value == ""; time.Sleep(50 * time.Millisecond) {
		var logs strings.Builder
		if err := d.client.ProcessLogs(t.Context(), sb.ID, "holder", false, func(ev client.ExecEvent) error {
			logs.Write(ev.Data)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		value = strings.TrimSpace(logs.String())
		if time.Now().After(deadline) {
			t.Fatal("the holder printed no value in 20 s")
		}
	}
	if got, err := d.client.SuspendSandbox(t.Context(), sb.ID); err != nil || got.State != client.StateSuspended {
		t.Fatalf("suspend: %+v, %v", got, err)
	}
	if err := d.client.SignalProcess(t.Context(), sb.ID, "holder", "USR1"); err != nil {
		t.Fatalf("signal the holder in the woken sandbox: %v", err)
	}
	res := d.exec(sb.ID, `i=0; while [ ! -s ~/said ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; cat ~/said`)
	if res.Stdout != value {
		t.Errorf("the value after suspend and resume: %q, want %q (%+v)", res.Stdout, value, res)
	}
	procs, err := d.client.ListProcesses(t.Context(), sb.ID)
	if err != nil || len(procs) != 1 || procs[0].Pid != p.Pid || procs[0].Status != client.ProcessRunning {
		t.Errorf("processes after the resume: %+v, %v; want holder running as pid %d", procs, err, p.Pid)
	}
}
