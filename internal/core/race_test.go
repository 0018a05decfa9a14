package core

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Races between changes of one sandbox's life, each run many times (go
// test -race finds the data races; these find the logical ones): each
// call either does what it asks or fails with a clear kind, and the
// sandbox ends in a state of the table, never in a step under way, with
// the backend agreeing.

// raceRounds is how many times each race runs.
const raceRounds = 12

// race runs the functions at once and waits for them.
func race(fns ...func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn()
		}()
	}
	close(start)
	wg.Wait()
}

// settled checks that sandbox id rests in a state of the table, and
// returns it.
func (d *testDaemon) settled(t *testing.T, id string) store.State {
	t.Helper()
	rec, err := d.m.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if !slices.Contains(store.States(), rec.State) || store.Transient(rec.State) {
		t.Fatalf("sandbox %s rests in %q (%s)", id, rec.State, rec.StateReason)
	}
	return rec.State
}

// expect fails the test unless err is nil or of one of the kinds.
func expect(t *testing.T, what string, err error, kinds ...error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, k := range kinds {
		if errors.Is(err, k) {
			return
		}
	}
	t.Errorf("%s: %v", what, err)
}

// An Update of the timers beside a suspend never writes running over suspended, and its
// timeout is kept.
func TestRaceKeepaliveSuspend(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	for range raceRounds {
		sb := d.create(t, create.Options{})
		race(
			func() {
				_, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"})
				expect(t, "Suspend", err)
			},
			func() { _, err := d.m.Update(ctx, sb.ID, Update{IdleTimeout: time.Hour}); expect(t, "Update", err) },
		)
		if got := d.settled(t, sb.ID); got != store.Suspended {
			t.Errorf("after Suspend and Keepalive: %s, want suspended", got)
		}
		if rec, _ := d.m.Get(ctx, sb.ID); rec.IdleTimeout != time.Hour {
			t.Errorf("Keepalive's timeout lost: %s", rec.IdleTimeout)
		}
		if d.m.liveInstance(sb.ID) != nil {
			t.Errorf("a suspended sandbox has a running instance")
		}
		if err := d.m.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// Delete beside a pause: the sandbox is gone in the end, whichever came
// first, and nothing of it is left running. (Delete beside a snapshot or a
// fork is the templates service's test, internal/core/template.)
func TestRaceDelete(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	others := map[string]func(id string) error{
		"pause": func(id string) error { _, err := d.m.Pause(ctx, id); return err },
	}
	for name, other := range others {
		t.Run(name, func(t *testing.T) {
			for range raceRounds {
				sb := d.create(t, create.Options{})
				race(
					func() { expect(t, "Delete", d.m.deleteAndWait(ctx, sb.ID)) },
					func() {
						expect(t, name, other(sb.ID), errdefs.ErrNotFound, errdefs.ErrFailedPrecondition, errdefs.ErrConflict)
					},
				)
				if _, err := d.m.Get(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("after Delete and %s: %v, want not found", name, err)
				}
				if d.listed(t, sb.ID) {
					t.Errorf("the backend still has %s", sb.ID)
				}
				if d.m.liveInstance(sb.ID) != nil {
					t.Errorf("a deleted sandbox has a running instance")
				}
			}
		})
	}
}

// Two resumes (and a call) at once wake a suspended sandbox once: all
// succeed and it runs, with one agent.
func TestRaceResumes(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{})
	for range raceRounds {
		if _, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"}); err != nil {
			t.Fatal(err)
		}
		race(
			func() { _, err := d.m.Resume(ctx, sb.ID); expect(t, "Resume", err) },
			func() { _, err := d.m.Resume(ctx, sb.ID); expect(t, "Resume", err) },
			func() {
				out, _, err := d.exec(t, sb.ID, execRequest{Command: "echo up"})
				if err != nil || out != "up\n" {
					t.Errorf("exec beside the resumes: %q, %v", out, err)
				}
			},
		)
		if got := d.settled(t, sb.ID); got != store.Running {
			t.Errorf("after two resumes: %s, want running", got)
		}
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// A suspend beside a command waits for nothing and breaks nothing: either
// the command ran and the suspend was refused as a conflict, or the
// suspend came first and the command woke the sandbox.
func TestRaceExecSuspend(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{})
	for range raceRounds {
		race(
			func() {
				_, err := d.m.Halt(ctx, sb.ID, Halt{Reason: "suspended by request"})
				expect(t, "Suspend", err, errdefs.ErrConflict)
			},
			func() {
				out, _, err := d.exec(t, sb.ID, execRequest{Command: "echo ran"})
				if err != nil || out != "ran\n" {
					t.Errorf("exec beside a suspend: %q, %v", out, err)
				}
			},
		)
		got := d.settled(t, sb.ID)
		if got != store.Running && got != store.Suspended {
			t.Errorf("after exec and suspend: %s", got)
		}
		if (got == store.Running) != (d.m.liveInstance(sb.ID) != nil) {
			t.Errorf("state %s, but running instance: %v", got, d.m.liveInstance(sb.ID) != nil)
		}
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}
