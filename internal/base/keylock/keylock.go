package core

import (
	"context"
	"sync"
)

// locks are the sandboxes' locks, one per sandbox, kept while someone
// holds or waits for it: every change of a sandbox's state (create,
// pause, thaw, suspend, stop, resume, snapshot, delete, a lost container)
// happens under its lock, so that the backend sees one call at a time for
// a sandbox, as its contract asks. Waiting can be given up (ctx), so a
// call whose caller left does not queue behind a slow teardown forever.
// (containerd's pkg/kmutex is the model.)
type locks struct {
	mu sync.Mutex
	m  map[string]*lockEntry
}

type lockEntry struct {
	ch    chan struct{} // holds a token while locked
	users int           // holders and waiters
}

// lock takes key's lock, or returns ctx's error if ctx ends first; on
// success the caller calls the returned unlock once.
func (l *locks) lock(ctx context.Context, key string) (unlock func(), err error) {
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

func (l *locks) done(key string, e *lockEntry) {
	l.mu.Lock()
	if e.users--; e.users == 0 {
		delete(l.m, key)
	}
	l.mu.Unlock()
}
