package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/testclock"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// A paused sandbox is frozen until a call needs it, survives a daemon
// restart paused, and can be deleted.
func TestPauseAndWake(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{})
	rec, err := d.m.Pause(ctx, sb.ID)
	if err != nil || rec.State != store.Paused || rec.StateReason != "paused by request" {
		t.Fatalf("Pause: %+v, %v", rec, err)
	}
	if again, err := d.m.Pause(ctx, sb.ID); err != nil || again.State != store.Paused {
		t.Errorf("Pause of a paused sandbox: %+v, %v", again, err)
	}
	out, res, err := d.exec(t, sb.ID, execRequest{Command: "echo awake"})
	if err != nil || out != "awake\n" || res.ExitCode != 0 {
		t.Fatalf("exec in a paused sandbox: %q, %+v, %v", out, res, err)
	}
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Running || got.StateReason != "woken by a call" {
		t.Errorf("after the exec: %s (%s), want running, woken by a call", got.State, got.StateReason)
	}

	// Paused across a restart.
	if _, err := d.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d = state.start(t)
	if got, err := d.m.Get(ctx, sb.ID); err != nil || got.State != store.Paused {
		t.Fatalf("after a restart: %+v, %v; want paused", got, err)
	}
	if rec, err := d.m.Resume(ctx, sb.ID); err != nil || rec.State != store.Running || rec.StateReason != "unpaused by request" {
		t.Fatalf("Resume of a paused sandbox: %+v, %v", rec, err)
	}
	if out, _, err := d.exec(t, sb.ID, execRequest{Command: "echo again"}); err != nil || out != "again\n" {
		t.Errorf("exec after Resume: %q, %v", out, err)
	}
	if _, err := d.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.m.deleteAndWait(ctx, sb.ID); err != nil {
		t.Fatalf("Delete of a paused sandbox: %v", err)
	}
	if d.listed(t, sb.ID) {
		t.Error("the backend still has the deleted sandbox")
	}
}

// A suspended sandbox keeps its files, wakes for the next call (not for
// stats), stays suspended across a daemon restart, and can be deleted.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{Env: map[string]string{"KEPT": "env"}})
	if _, _, err := d.exec(t, sb.ID, execRequest{Command: "echo kept > note"}); err != nil {
		t.Fatal(err)
	}
	rec, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"})
	if err != nil || rec.State != store.Suspended {
		t.Fatalf("Suspend: %+v, %v", rec, err)
	}
	if a, err := d.m.Activity(ctx, sb.ID); err != nil || !errors.Is(a.StatsErr, errdefs.ErrFailedPrecondition) {
		t.Errorf("Stats of a suspended sandbox: %v, want failed precondition", err)
	}
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Suspended {
		t.Fatalf("Stats woke the sandbox: %s", got.State)
	}
	out, _, err := d.exec(t, sb.ID, execRequest{Command: `cat note; echo "$KEPT"`})
	if err != nil || out != "kept\nenv\n" {
		t.Fatalf("exec in a suspended sandbox: %q, %v", out, err)
	}
	if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Running || got.StateReason != "woken by a call" {
		t.Errorf("after the exec: %s (%s)", got.State, got.StateReason)
	}

	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d = state.start(t)
	if got, err := d.m.Get(ctx, sb.ID); err != nil || got.State != store.Suspended {
		t.Fatalf("after a restart: %+v, %v; want suspended", got, err)
	}
	if rec, err := d.m.Resume(ctx, sb.ID); err != nil || rec.State != store.Running {
		t.Fatalf("Resume: %+v, %v", rec, err)
	}
	if out, _, err := d.exec(t, sb.ID, execRequest{Command: "cat note"}); err != nil || out != "kept\n" {
		t.Errorf("after Resume: %q, %v", out, err)
	}
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	if err := d.m.deleteAndWait(ctx, sb.ID); err != nil {
		t.Fatalf("Delete of a suspended sandbox: %v", err)
	}
	if d.listed(t, sb.ID) {
		t.Error("the backend still has the deleted sandbox")
	}
}

// A hold says whether it woke its sandbox, which a preview then waits for
// the ports of: a hold of a running or paused sandbox did not, one of a
// suspended sandbox did.
func TestAcquireSaysWoken(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{})
	woken := func() bool {
		t.Helper()
		r, release, err := d.m.Acquire(ctx, sb.ID)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		defer release()
		return r.Woken()
	}
	if woken() {
		t.Error("a hold of a running sandbox says it woke it")
	}
	if _, err := d.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if woken() {
		t.Error("a hold of a paused sandbox says it woke it: thawed, it listens where it did")
	}
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Error("a hold of a suspended sandbox does not say it woke it")
	}
	if woken() {
		t.Error("the next hold says it woke the sandbox too")
	}
	if err := d.m.deleteAndWait(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// A daemon killed in the middle of a suspend finishes it when it starts
// again: the sandbox is wholly suspended, and wakes with its files.
func TestSuspendFinishedAfterRestart(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{})
	if _, _, err := d.exec(t, sb.ID, execRequest{Command: "echo kept > note"}); err != nil {
		t.Fatal(err)
	}
	// What a daemon killed right after deciding to suspend leaves.
	rec, err := d.db.GetSandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.db.ChangeState(ctx, store.StateChange{ID: rec.ID, From: []store.State{rec.State}, To: store.Suspending, Reason: "idle for 1s", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d = state.start(t)
	got, err := d.m.Get(ctx, sb.ID)
	if err != nil || got.State != store.Suspended || got.StateReason != "idle for 1s" {
		t.Fatalf("after the restart: %+v, %v; want suspended", got, err)
	}
	if out, _, err := d.exec(t, sb.ID, execRequest{Command: "cat note"}); err != nil || out != "kept\n" {
		t.Errorf("the woken sandbox: %q, %v", out, err)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// A daemon killed in the middle of a resume leaves, after its restart, a
// wholly suspended sandbox that the next call wakes with its files: both
// when the runtime had started it again and when it had not begun.
func TestResumeInterruptedByRestart(t *testing.T) {
	t.Parallel()
	for _, started := range []bool{true, false} {
		t.Run(map[bool]string{true: "runtime started", false: "nothing started"}[started], func(t *testing.T) {
			state := newDaemonState(t)
			d := state.start(t)
			ctx := t.Context()
			sb := d.create(t, create.Options{})
			if _, _, err := d.exec(t, sb.ID, execRequest{Command: "echo kept > note"}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
				t.Fatal(err)
			}
			// What a daemon killed half-way through a resume leaves.
			rec, err := d.db.GetSandbox(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.db.ChangeState(ctx, store.StateChange{ID: rec.ID, From: []store.State{rec.State}, To: store.Resuming, Reason: "woken by a call", At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if started {
				tmpl, err := state.templates.Version(rec.Template, rec.TemplateVersion)
				if err != nil {
					t.Fatal(err)
				}
				h := backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
				if err := d.backend.Resume(ctx, h, d.m.spec(rec.ID, tmpl.RootDir, tmpl.Binds, create.Options{})); err != nil {
					t.Fatal(err)
				}
			}
			d.stop(t)
			d = state.start(t)
			got, err := d.m.Get(ctx, sb.ID)
			if err != nil || got.State != store.Suspended || !strings.Contains(got.StateReason, "cut short by a daemon restart") {
				t.Fatalf("after the restart: %+v, %v; want suspended", got, err)
			}
			if err := d.backend.Recover(ctx, backend.Handle{ID: sb.ID, Backend: sb.Backend}); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("the half-resumed sandbox's agent after the restart: %v, want it gone", err)
			}
			if out, _, err := d.exec(t, sb.ID, execRequest{Command: "cat note"}); err != nil || out != "kept\n" {
				t.Errorf("the woken sandbox: %q, %v", out, err)
			}
			if got, _ := d.m.Get(ctx, sb.ID); got.State != store.Running {
				t.Errorf("after the call: %s", got.State)
			}
			if err := d.m.Delete(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A sandbox is deleted at the end of its max lifetime, suspended or not;
// a keepalive moves the end.
func TestMaxLifetime(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	d := newDaemonState(t).start(t, withClock(clock))
	ctx := t.Context()
	running := d.create(t, create.Options{MaxLifetime: 2 * time.Minute})
	suspended := d.create(t, create.Options{MaxLifetime: 2 * time.Minute})
	extended := d.create(t, create.Options{MaxLifetime: 2 * time.Minute})
	if got := running.ExpiresAt.Sub(running.CreatedAt); got != 2*time.Minute {
		t.Errorf("expires %v after its creation, want 2m", got)
	}
	if _, err := d.m.Halt(ctx, suspended.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.m.Update(ctx, extended.ID, Update{Lifetime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	d.tickAfter(t, clock, 2*time.Minute-time.Second)
	for _, id := range []string{running.ID, suspended.ID, extended.ID} {
		if _, err := d.m.Get(ctx, id); err != nil {
			t.Errorf("a second before its max lifetime: %v", err)
		}
	}
	d.tickAfter(t, clock, time.Second)
	for _, id := range []string{running.ID, suspended.ID} {
		if _, err := d.m.Get(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("at its max lifetime: %v, want deleted", err)
		}
		if d.listed(t, id) {
			t.Error("the backend still has an expired sandbox")
		}
	}
	if got, err := d.m.Get(ctx, extended.ID); err != nil || got.State != store.Running {
		t.Errorf("the sandbox whose lifetime was extended: %+v, %v", got, err)
	}
	if err := d.m.Delete(ctx, extended.ID); err != nil {
		t.Fatal(err)
	}
}

// A keepalive sets a new idle timeout from now: a sandbox whose 1 s
// timeout became an hour is not suspended a minute later.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	d := newDaemonState(t).start(t, withClock(clock))
	ctx := t.Context()
	sb := d.create(t, create.Options{IdleTimeout: time.Second})
	rec, err := d.m.Update(ctx, sb.ID, Update{IdleTimeout: time.Hour, IdleAction: store.IdleDelete})
	if err != nil || rec.IdleTimeout != time.Hour || rec.IdleAction != store.IdleDelete {
		t.Fatalf("Update of its timers: %+v, %v", rec, err)
	}
	d.tickAfter(t, clock, time.Minute)
	if got, err := d.m.Get(ctx, sb.ID); err != nil || got.State != store.Running {
		t.Errorf("a minute after a keepalive of an hour: %+v, %v", got, err)
	}
	for _, bad := range []struct {
		timeout  time.Duration
		action   string
		lifetime time.Duration
	}{{0, "", 0}, {time.Hour, "nap", 0}, {31 * 24 * time.Hour, "", 0}, {0, "", 400 * 24 * time.Hour}, {-time.Second, "", 0}} {
		if _, err := d.m.Update(ctx, sb.ID, Update{IdleTimeout: bad.timeout, IdleAction: bad.action, Lifetime: bad.lifetime}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Update(%v, %q, %v): %v, want invalid argument", bad.timeout, bad.action, bad.lifetime, err)
		}
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// A stopped sandbox keeps its files, not its processes; calls do not wake
// it (they say how to start it), a start does, with the background
// processes that ran. The idle timer stops one when asked to, a suspended
// one can be stopped, a restart finishes a stop cut short, and a key
// starts the stopped sandbox it names.
func TestStopAndStart(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{Key: "conversation-1"})
	if _, _, err := d.exec(t, sb.ID, execRequest{Command: "echo kept > note"}); err != nil {
		t.Fatal(err)
	}
	d.startProcess(t, sb.ID, store.Process{Name: "svc", Argv: []string{"sleep", "600"}, Cwd: d.backend.Root(sb.ID) + rootfs.Workspace})
	rec, err := d.m.Halt(ctx, sb.ID, Halt{Stop: true, Reason: "stopped by request"})
	if err != nil || rec.State != store.Stopped {
		t.Fatalf("Stop: %+v, %v", rec, err)
	}
	_, _, err = d.exec(t, sb.ID, execRequest{Command: "true"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "hutch start "+sb.ID) {
		t.Errorf("exec in a stopped sandbox: %v, want failed precondition saying how to start it", err)
	}
	if a, err := d.m.Activity(ctx, sb.ID); err != nil || len(a.Reasons) != 1 || !strings.Contains(a.Reasons[0], "start") {
		t.Errorf("activity of a stopped sandbox: %+v, %v", a, err)
	}
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Suspend of a stopped sandbox: %v, want failed precondition", err)
	}
	if rec, err := d.m.Halt(ctx, sb.ID, Halt{Stop: true, Reason: "again"}); err != nil || rec.State != store.Stopped || rec.StateReason != "stopped by request" {
		t.Errorf("Stop of a stopped sandbox: %+v, %v; want it as it was", rec, err)
	}
	if rec, err := d.m.Resume(ctx, sb.ID); err != nil || rec.State != store.Running || rec.StateReason != "started by request" {
		t.Fatalf("start: %+v, %v", rec, err)
	}
	if out, _, err := d.exec(t, sb.ID, execRequest{Command: "cat note"}); err != nil || out != "kept\n" {
		t.Errorf("after the start: %q, %v", out, err)
	}
	if _, ok := d.running(t, sb.ID)["svc"]; !ok {
		t.Error("the background process does not run after the start")
	}

	// Suspended, then stopped where it is.
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := d.m.Halt(ctx, sb.ID, Halt{Stop: true, Reason: "stopped by request"}); err != nil || rec.State != store.Stopped {
		t.Fatalf("Stop of a suspended sandbox: %+v, %v", rec, err)
	}
	// A key's get-or-create starts it.
	if got, created, err := d.m.Create(ctx, create.Options{Key: "conversation-1"}); err != nil || created || got.ID != sb.ID || got.State != store.Running {
		t.Fatalf("Create of a stopped sandbox's key: %+v, %v, %v", got, created, err)
	}

	// What a daemon killed right after deciding to stop leaves.
	stored, err := d.db.GetSandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.db.ChangeState(ctx, store.StateChange{ID: stored.ID, From: []store.State{stored.State}, To: store.Stopping, Reason: "stopped by request", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	clock := testclock.New()
	d = state.start(t, withClock(clock))
	if got, err := d.m.Get(ctx, sb.ID); err != nil || got.State != store.Stopped {
		t.Fatalf("after a restart mid-stop: %+v, %v; want stopped", got, err)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}

	// The idle timer stops a sandbox whose idle action is stop.
	idle := d.create(t, create.Options{IdleTimeout: time.Second, IdleAction: store.IdleStop})
	d.tickAfter(t, clock, time.Second)
	if got, err := d.m.Get(ctx, idle.ID); err != nil || got.State != store.Stopped || got.StateReason != "idle for 1s" {
		t.Fatalf("a sandbox idle for 1 s with idle action stop: %+v, %v; want stopped, idle for 1s", got, err)
	}
	if err := d.m.Delete(ctx, idle.ID); err != nil {
		t.Fatal(err)
	}
}

// An update changes a sandbox's env at once, running or not, and its
// limits while it is suspended, for its next start; bounds as a create's.
func TestUpdateShape(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{Env: map[string]string{"STAGE": "one"}})
	if _, err := d.m.Update(ctx, sb.ID, Update{Env: map[string]string{"STAGE": "two"}, Metadata: map[string]string{"owner": "t"}}); err != nil {
		t.Fatal(err)
	}
	if out, _, err := d.exec(t, sb.ID, execRequest{Command: "echo $STAGE"}); err != nil || out != "two\n" {
		t.Errorf("a command after the env's update: %q, %v", out, err)
	}
	if _, err := d.m.Update(ctx, sb.ID, Update{MemoryMB: 1024}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("new limits of a running sandbox: %v, want failed precondition", err)
	}
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "for the test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.m.Update(ctx, sb.ID, Update{MemoryMB: 1}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a memory limit below a create's bound: %v, want invalid argument", err)
	}
	rec, err := d.m.Update(ctx, sb.ID, Update{CPUs: 0.5, MemoryMB: 1024, Pids: 300})
	if err != nil || rec.CPUs != 0.5 || rec.MemoryMB != 1024 || rec.Pids != 300 || rec.Metadata["owner"] != "t" || rec.State != store.Suspended {
		t.Fatalf("new limits of a suspended sandbox: %+v, %v", rec, err)
	}
	if out, _, err := d.exec(t, sb.ID, execRequest{Command: "echo $STAGE"}); err != nil || out != "two\n" {
		t.Errorf("a command after the resume: %q, %v", out, err)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}
