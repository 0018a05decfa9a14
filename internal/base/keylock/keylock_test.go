package keylock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One holder per key at a time; other keys are free; a wait given up
// returns ctx's error and leaves no entry; an unlocked key is forgotten.
func TestLocks(t *testing.T) {
	t.Parallel()
	var l Locks
	unlockA, err := l.Lock(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(t.Context(), "b")
	if err != nil {
		t.Fatalf("another key waits for a: %v", err)
	}
	unlockB()

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Lock of a held key: %v, want the context's deadline", err)
	}

	got := make(chan func(), 1)
	go func() {
		unlock, err := l.Lock(context.Background(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	select {
	case <-got:
		t.Fatal("a waiter took a held lock")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	(<-got)()

	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) != 0 {
		t.Errorf("keys kept after every holder and waiter left: %v", l.m)
	}
}
