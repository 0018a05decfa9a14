package netproxy

import (
	"context"
	"sync"
)

// maxEvents is how many refusals a sandbox's Log keeps: the newest.
const maxEvents = 1000

// Log keeps a sandbox's latest refusals, numbered from 1 in the order they
// came, for the API to list and follow (GET …/network/events) and for a
// command's result to cite those made while it ran.
type Log struct {
	mu     sync.Mutex
	events ring[Event] // the newest maxEvents
	wake   chan struct{}
}

// ring keeps the newest of what is added to it, numbered from 1 in the
// order it came: a cursor (the number of the last one read) finds what
// came after.
type ring[T any] struct {
	items []T    // the newest
	last  uint64 // the number of the newest; 0: none yet
}

// add appends v, keeping the newest keep.
func (r *ring[T]) add(v T, keep int) {
	r.last++
	r.items = append(r.items, v)
	if len(r.items) > keep {
		r.items = append(r.items[:0], r.items[len(r.items)-keep:]...)
	}
}

// after returns a copy of those numbered after cursor that it still has.
func (r *ring[T]) after(cursor uint64) []T {
	if cursor >= r.last {
		return nil
	}
	first := r.last - uint64(len(r.items)) // the number before the oldest kept
	skip := uint64(0)
	if cursor > first {
		skip = cursor - first
	}
	return append([]T(nil), r.items[skip:]...)
}

// Add appends ev.
func (l *Log) Add(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events.add(ev, maxEvents)
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// Last is the number of the newest event (0 before the first): a cursor
// for After.
func (l *Log) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events.last
}

// After returns the events numbered after cursor that the log still has,
// and the cursor after them.
func (l *Log) After(cursor uint64) ([]Event, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events.after(cursor), l.events.last
}

// Wait returns the events after cursor, waiting for one if there is none
// yet, until ctx ends.
func (l *Log) Wait(ctx context.Context, cursor uint64) ([]Event, uint64, error) {
	for {
		l.mu.Lock()
		if evs := l.events.after(cursor); len(evs) > 0 {
			last := l.events.last
			l.mu.Unlock()
			return evs, last, nil
		}
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, cursor, ctx.Err()
		case <-wake:
		}
	}
}
