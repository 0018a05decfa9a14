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
	events []Event // the newest maxEvents
	last   uint64  // the number of the newest event; 0: none yet
	wake   chan struct{}
}

// Add appends ev.
func (l *Log) Add(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	l.events = append(l.events, ev)
	if len(l.events) > maxEvents {
		l.events = append(l.events[:0], l.events[len(l.events)-maxEvents:]...)
	}
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
	return l.last
}

// After returns the events numbered after cursor that the log still has,
// and the cursor after them.
func (l *Log) After(cursor uint64) ([]Event, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.after(cursor), l.last
}

func (l *Log) after(cursor uint64) []Event {
	if cursor >= l.last {
		return nil
	}
	first := l.last - uint64(len(l.events)) // the number before the oldest kept
	skip := uint64(0)
	if cursor > first {
		skip = cursor - first
	}
	return append([]Event(nil), l.events[skip:]...)
}

// Wait returns the events after cursor, waiting for one if there is none
// yet, until ctx ends.
func (l *Log) Wait(ctx context.Context, cursor uint64) ([]Event, uint64, error) {
	for {
		l.mu.Lock()
		if evs := l.after(cursor); len(evs) > 0 {
			last := l.last
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
