package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A sandbox with no call and no running command for its idle timeout is
// suspended on time (within 4 s after it; 6 s on a loaded host), under each runtime; one running a command
// stays awake, and so does one running `sleep 600` as a background
// process, which a suspend and resume start again; the next call wakes the
// idle one with its files, ~/.local included. With idle_action delete, it
// goes instead.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		idle := d.create(client.CreateSandboxRequest{Runtime: runtime, IdleTimeoutS: 2})
		busy := d.create(client.CreateSandboxRequest{Runtime: runtime, IdleTimeoutS: 2})
		background := d.create(client.CreateSandboxRequest{Runtime: runtime, IdleTimeoutS: 2})
		if _, err := d.client.StartProcess(t.Context(), background.ID, client.StartProcessRequest{
			Name: "sleeper", Command: "echo started; exec sleep 600",
		}); err != nil {
			t.Fatal(err)
		}
		if res := d.exec(idle.ID, `mkdir -p ~/.local/lib/python3/site-packages && echo 'VALUE = 42' > ~/.local/lib/python3/site-packages/mypkg.py`); res.ExitCode != 0 {
			t.Fatalf("install into ~/.local: %+v", res)
		}
		lastCall := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := d.client.Exec(t.Context(), busy.ID, client.ExecRequest{Command: "sleep 5"})
			done <- err
		}()
		for {
			sb, err := d.client.GetSandbox(t.Context(), idle.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The decision shows at once as suspending; a runtime then
			// takes its time to tear down (gVisor ~2 s here). Never
			// before the timeout; after it, within the timers' round
			// (1 s) and what a loaded host adds to it (beside the rest
			// of the suite, one round took 2 s).
			if sb.State == client.StateSuspending || sb.State == client.StateSuspended {
				if after := time.Since(lastCall); after < 2*time.Second || after > 6*time.Second {
					t.Errorf("suspending %v after the last call, idle timeout 2 s", after.Round(100*time.Millisecond))
				}
				break
			}
			if time.Since(lastCall) > 8*time.Second {
				t.Fatalf("idle sandbox still %s 8 s after its last call (idle timeout 2 s)", sb.State)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// How long the runtime then takes is not this test's
		// business, only that it ends: beside the suite on CI, a gVisor
		// suspend took 12 s (and a gVisor create as long).
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if sb, err := d.client.GetSandbox(t.Context(), idle.ID); err != nil || sb.State == client.StateSuspended {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("still suspending 60 s on")
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("the busy sandbox's command was cut short: %v", err)
		}
		if sb, err := d.client.GetSandbox(t.Context(), busy.ID); err != nil || sb.State != client.StateRunning {
			t.Fatalf("a sandbox running a command was taken as idle: %+v, %v", sb, err)
		}
		checkBackgroundProcess(t, d, background.ID)
		res := d.exec(idle.ID, `PYTHONPATH=~/.local/lib/python3/site-packages python3 -c 'import mypkg; print(mypkg.VALUE)'`)
		if res.ExitCode != 0 || res.Stdout != "42\n" {
			t.Fatalf("the woken sandbox: %+v", res)
		}

		gone := d.create(client.CreateSandboxRequest{Runtime: runtime, IdleTimeoutS: 1, IdleAction: client.IdleDelete})
		// The decision shows at once as deleting; a loaded host takes
		// its time to tear a gVisor sandbox down (the leak census after
		// the test checks that it goes).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			sb, err := d.client.GetSandbox(t.Context(), gone.ID)
			if client.IsNotFound(err) || err == nil && sb.State == client.StateDeleting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a sandbox with idle_action delete not deleting 5 s after its idle timeout of 1 s")
			}
		}
	})
}

// checkBackgroundProcess checks that sandbox id, running the background
// process "sleeper" past its idle timeout, is awake and says why, and that
// a suspend and resume start the process again.
func checkBackgroundProcess(t *testing.T, d *daemon, id string) {
	t.Helper()
	if sb, err := d.client.GetSandbox(t.Context(), id); err != nil || sb.State != client.StateRunning {
		t.Fatalf("a sandbox running a background process was taken as idle: %+v, %v", sb, err)
	}
	act, err := d.client.Activity(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !act.Busy || act.ActionAt != nil || !strings.Contains(strings.Join(act.Reasons, "; "), `background process "sleeper"`) {
		t.Errorf("activity of the sandbox running a background process: %+v", act)
	}
	if _, err := d.client.SuspendSandbox(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	procs, err := d.client.ListProcesses(t.Context(), id)
	if err != nil || len(procs) != 1 || procs[0].Status != client.ProcessSuspended {
		t.Fatalf("processes of the suspended sandbox: %+v, %v", procs, err)
	}
	if _, err := d.client.ResumeSandbox(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	procs, err = d.client.ListProcesses(t.Context(), id)
	if err != nil || len(procs) != 1 || procs[0].Status != client.ProcessRunning {
		t.Fatalf("processes after the resume: %+v, %v", procs, err)
	}
	if res := d.exec(id, "ps -eo args | grep -c '^sleep 600'"); res.Stdout != "1\n" {
		t.Errorf("sleep 600 after the resume: %+v", res)
	}
	var logs strings.Builder
	if err := d.client.ProcessLogs(t.Context(), id, "sleeper", false, func(ev client.ExecEvent) error {
		logs.Write(ev.Data)
		return nil
	}); err != nil || logs.String() != "started\n" {
		t.Errorf("logs after the resume: %q, %v", logs.String(), err)
	}
	if err := d.client.DeleteProcess(t.Context(), id, "sleeper"); err != nil {
		t.Fatal(err)
	}
}

// Streaming a flood of output goes at the reader's pace without the daemon
// holding it in memory.
func testStreamFloodKeepsDaemonMemoryFlat(t *testing.T) {
	d := startDaemon(t)
	sb := d.create(client.CreateSandboxRequest{})
	const total = 512 << 20
	var got int64
	exit, err := d.client.ExecStream(t.Context(), sb.ID, client.ExecRequest{Command: "head -c " + strconv.Itoa(total) + " /dev/zero | tr '\\0' x"},
		func(ev client.ExecEvent) error {
			got += int64(len(ev.Data))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if exit.ExitCode != 0 || got != total {
		t.Fatalf("streamed %d bytes, exit %d; want %d and 0", got, exit.ExitCode, total)
	}
	if peak := peakRSS(t, d.cmd.Process.Pid); peak > 100<<20 {
		t.Fatalf("daemon's peak RSS %d MiB after streaming 512 MiB: output is being buffered", peak>>20)
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
