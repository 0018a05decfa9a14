package procexit

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A process that is not the watcher's child: started through setsid, whose
// own child it is, and which it replaces (exec).
func start(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func TestWait(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the proc connector needs root")
	}
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); time.Sleep(1100 * time.Millisecond) }() // the listener wakes each second
	w := New(ctx, nil)
	if !w.listened {
		t.Skip("the proc connector is not usable here")
	}
	for _, tc := range []struct {
		name   string
		script string
		kill   bool
		want   string
	}{
		{"killed", "exec sleep 100", true, "was killed by signal 9 (SIGKILL)"},
		{"exits", "sleep 0.2; exit 3", false, "exited with code 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := start(t, tc.script)
			if tc.kill {
				time.AfterFunc(100*time.Millisecond, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			}
			began := time.Now()
			e, err := w.Wait(t.Context(), pid, func() bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			if e.String() != tc.want {
				t.Errorf("Wait: %s, want %s", e, tc.want)
			}
			if d := time.Since(began); d > 2*time.Second {
				t.Errorf("seen after %s", d)
			}
		})
	}
	// Waiting ends with its context, and for a pid that is not the one
	// meant.
	pid := start(t, "exec sleep 100")
	wctx, wcancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer wcancel()
	if _, err := w.Wait(wctx, pid, func() bool { return true }); err == nil {
		t.Error("Wait past its context: no error")
	}
	if e, err := w.Wait(t.Context(), pid, func() bool { return false }); err != nil || e.Known {
		t.Errorf("Wait of another process: %v %v", e, err)
	}
}
