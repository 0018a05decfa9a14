package core

import (
	"errors"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A key's sandbox is made once, found again (woken if suspended), by one
// caller at a time, and made anew once deleted.
func TestOpenByKey(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	first, created, err := d.m.Create(ctx, create.Options{Key: "chat-1"})
	if err != nil || !created || first.Key != "chat-1" {
		t.Fatalf("Create of a new key: %+v, %v, %v", first, created, err)
	}
	again, created, err := d.m.Create(ctx, create.Options{Key: "chat-1"})
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("Create of the key again: %+v, %v, %v; want %s, not created", again, created, err, first.ID)
	}
	if _, err := d.m.Halt(ctx, first.ID, Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	woken, created, err := d.m.Create(ctx, create.Options{Key: "chat-1"})
	if err != nil || created || woken.ID != first.ID || woken.State != store.Running {
		t.Fatalf("Create of a suspended key: %+v, %v, %v", woken, created, err)
	}
	if _, _, err := d.m.Create(ctx, create.Options{Key: "chat-1", Template: "python"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Create of the key with another template: %v, want a conflict", err)
	}
	if err := d.m.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	fresh, created, err := d.m.Create(ctx, create.Options{Key: "chat-1"})
	if err != nil || !created || fresh.ID == first.ID {
		t.Fatalf("Create after the key's sandbox went: %+v, %v, %v", fresh, created, err)
	}

	// Callers racing for a new key get one sandbox.
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, _, err := d.m.Create(ctx, create.Options{Key: "team"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = sb.ID
		}()
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("racing opens of one key made several sandboxes: %v", ids)
		}
	}
	for _, id := range []string{fresh.ID, ids[0]} {
		if err := d.m.Delete(ctx, id); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := d.m.Create(ctx, create.Options{Key: "bad\x00key"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a key with a control character: %v", err)
	}
}
