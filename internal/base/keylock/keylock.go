// Package keylock is a lock per key, kept only while someone holds or
// waits for it, whose wait can be given up (containerd's pkg/kmutex is
// the model). The core locks each sandbox with it, so that a call whose
// caller left does not queue behind a slow teardown forever; quotas lock
// each workspace.
package keylock

import (
	"context"
	"sync"
)

// Locks are locks by key. The zero value is ready to use.
type Locks struct {
	mu sync.Mutex
	m  map[string]*lockEntry
}

type lockEntry struct {
	ch    chan struct{} // holds a token while locked
	users int           // holders and waiters
}

// Lock takes key's lock, or returns ctx's error if ctx ends first; on
// success the caller calls the returned unlock once.
func (l *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*lockEntry{}
	}
	e, ok := l.m[key]
	if !ok {
		e = &lockEntry{ch: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.users++
	l.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; l.done(key, e) }, nil
	case <-ctx.Done():
		l.done(key, e)
		return nil, ctx.Err()
	}
}

func (l *Locks) done(key string, e *lockEntry) {
	l.mu.Lock()
	if e.users--; e.users == 0 {
		delete(l.m, key)
	}
	l.mu.Unlock()
}
