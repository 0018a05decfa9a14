package sandbox

import (
	"testing"

	"github.com/hutchdev/hutch/internal/store"
)

// A paused sandbox is frozen until a call needs it, survives a daemon
// restart paused, and can be deleted.
func TestPauseAndWake(t *testing.T) {
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	sb := d.create(t, CreateOptions{})
	rec, err := d.m.Pause(ctx, sb.ID)
	if err != nil || rec.State != store.StatePaused || rec.StateReason != "paused by request" {
		t.Fatalf("Pause: %+v, %v", rec, err)
	}
	if again, err := d.m.Pause(ctx, sb.ID); err != nil || again.State != store.StatePaused {
		t.Errorf("Pause of a paused sandbox: %+v, %v", again, err)
	}
	out, res, err := d.exec(t, sb.ID, ExecRequest{Command: "echo awake"})
	if err != nil || out != "awake\n" || res.ExitCode != 0 {
		t.Fatalf("exec in a paused sandbox: %q, %+v, %v", out, res, err)
	}
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.StateRunning || got.StateReason != "woken by a call" {
		t.Errorf("after the exec: %s (%s), want running, woken by a call", got.State, got.StateReason)
	}

	// Paused across a restart.
	if _, err := d.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d = state.start(t)
	if got, err := d.m.Get(ctx, sb.ID); err != nil || got.State != store.StatePaused {
		t.Fatalf("after a restart: %+v, %v; want paused", got, err)
	}
	if rec, err := d.m.Unpause(ctx, sb.ID); err != nil || rec.State != store.StateRunning || rec.StateReason != "unpaused by request" {
		t.Fatalf("Unpause: %+v, %v", rec, err)
	}
	if out, _, err := d.exec(t, sb.ID, ExecRequest{Command: "echo again"}); err != nil || out != "again\n" {
		t.Errorf("exec after Unpause: %q, %v", out, err)
	}
	if _, err := d.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("Delete of a paused sandbox: %v", err)
	}
	if d.listed(t, sb.ID) {
		t.Error("the backend still has the deleted sandbox")
	}
}
