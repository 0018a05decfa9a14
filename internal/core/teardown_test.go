package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// A delete answers before the teardown: meanwhile the sandbox is gone to
// every caller, its key makes a new sandbox, and the teardown is counted;
// afterwards the backend has nothing of it.
func TestDeleteAnswersBeforeTeardown(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	held, release := make(chan string, 1), make(chan struct{})
	d.backend.BeforeDestroy = func(h backend.Handle) {
		held <- h.ID
		<-release
	}
	sb, _, err := d.m.Create(ctx, create.Options{Key: "chat-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if id := <-held; id != sb.ID {
		t.Fatalf("teardown of %s, want %s", id, sb.ID)
	}
	if n := d.m.Health(t.Context()).Deleting; n != 1 {
		t.Errorf("Deleting() = %d during the teardown, want 1", n)
	}
	if _, err := d.m.Get(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get during the teardown: %v, want not found", err)
	}
	if list, _ := d.m.List(ctx); len(list) != 0 {
		t.Errorf("List during the teardown: %d sandboxes, want none", len(list))
	}
	if err := d.m.Delete(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a second Delete: %v, want not found at once", err)
	}
	d.backend.BeforeDestroy = nil // the next sandbox's teardown is not held
	again, created, err := d.m.Create(ctx, create.Options{Key: "chat-1"})
	if err != nil || !created || again.ID == sb.ID {
		t.Fatalf("keyed create during the teardown: %v, created %v, same %v; want a new sandbox", err, created, again != nil && again.ID == sb.ID)
	}
	close(release)
	// Close waits for teardowns; so does deleteAndWait.
	if err := d.m.deleteAndWait(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	if n := d.m.Health(t.Context()).Deleting; n != 0 {
		t.Errorf("Deleting() = %d after Close, want 0", n)
	}
	for _, id := range []string{sb.ID, again.ID} {
		if d.listed(t, id) {
			t.Errorf("the backend still has %s", id)
		}
	}
}

// A daemon killed between a delete's answer and the end of its teardown
// leaves the sandbox marked deleting: the next one finishes the teardown.
func TestTeardownFinishedAfterRestart(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{})
	if err := d.db.ChangeState(ctx, store.StateChange{ID: sb.ID, From: []store.State{store.Running}, To: store.Deleting, Reason: "deleted", At: d.m.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	d = state.start(t)
	if _, err := d.db.GetSandbox(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("record after the restart: %v, want not found", err)
	}
	if d.listed(t, sb.ID) {
		t.Error("the backend still has the deleted sandbox")
	}
}

// Creates wait while maxBacklog teardowns are behind, and go on when one
// ends: what deleted sandboxes hold stays bounded.
func TestCreateWaitsForTeardownBacklog(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	release := make(chan struct{})
	d.backend.BeforeDestroy = func(backend.Handle) { <-release }
	for range maxBacklog {
		sb := d.create(t, create.Options{})
		if err := d.m.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	made := make(chan error, 1)
	go func() {
		sb, err := d.m.create(ctx, create.Options{})
		if err == nil {
			err = d.m.Delete(context.WithoutCancel(ctx), sb.ID)
		}
		made <- err
	}()
	select {
	case err := <-made:
		t.Fatalf("a create with %d teardowns behind did not wait: %v", maxBacklog, err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-made; err != nil {
		t.Fatalf("the create after the backlog shrank: %v", err)
	}
}
