// Package backlog runs jobs in the background, a few at a time, and lets
// the callers that make them wait while too many are pending: work whose
// makers must not outrun it (the lifecycle kernel's teardowns of deleted
// sandboxes, each holding a disk, mounts and cgroups until it runs).
package backlog

import (
	"context"
	"sync"
)

// Queue is a backlog of jobs. Its methods are safe for concurrent use.
type Queue struct {
	most    int
	slots   chan struct{}
	running sync.WaitGroup

	mu      sync.Mutex
	pending int
	// fewer is closed, and replaced, when pending goes down.
	fewer chan struct{}
}

// New returns a Queue that runs at most workers jobs at once, and whose
// WaitFewer waits while most or more are pending.
func New(workers, most int) *Queue {
	return &Queue{most: most, slots: make(chan struct{}, workers), fewer: make(chan struct{})}
}

// Go queues job: it runs in a goroutine of its own once one of the
// workers' slots is free.
func (q *Queue) Go(job func()) {
	q.add(1)
	q.running.Add(1)
	go func() {
		defer q.running.Done()
		q.slots <- struct{}{}
		job()
		<-q.slots
		q.add(-1)
	}()
}

func (q *Queue) add(n int) {
	q.mu.Lock()
	q.pending += n
	if n < 0 {
		close(q.fewer)
		q.fewer = make(chan struct{})
	}
	q.mu.Unlock()
}

// Pending is how many jobs are running or waiting for a slot.
func (q *Queue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending
}

// WaitFewer returns once fewer than most jobs are pending, or ctx ends.
func (q *Queue) WaitFewer(ctx context.Context) error {
	for {
		q.mu.Lock()
		pending, fewer := q.pending, q.fewer
		q.mu.Unlock()
		if pending < q.most {
			return nil
		}
		select {
		case <-fewer:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Wait returns once every job queued so far has ended.
func (q *Queue) Wait() { q.running.Wait() }
