package backlog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// At most workers jobs run at once; WaitFewer waits while most are
// pending and returns as soon as one ends; Wait waits for them all.
func TestQueue(t *testing.T) {
	t.Parallel()
	q := New(2, 3)
	release := make(chan struct{})
	var running, most atomic.Int32
	for range 3 {
		q.Go(func() {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			running.Add(-1)
		})
	}
	if q.Pending() != 3 {
		t.Fatalf("pending %d, want 3", q.Pending())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := q.WaitFewer(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFewer with 3 pending of 3: %v, want to wait until ctx ends", err)
	}
	release <- struct{}{}
	if err := q.WaitFewer(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(release)
	q.Wait()
	if q.Pending() != 0 || most.Load() != 2 {
		t.Errorf("after Wait: %d pending, at most %d ran at once; want 0 and 2", q.Pending(), most.Load())
	}
}
