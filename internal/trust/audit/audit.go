// Package audit keeps the audit log: who (key, workspace, user) did what
// to which object, when, and how it ended, for every call that changes
// state or reads a file or a secret's existence. Entries are appended and
// never changed (the store refuses updates and deletes); they hold names
// and ids, never a request's body, so no secret's value and no file's
// content reaches the log. A service beside the core: the API records
// its calls here.
//
// Entries are written by a goroutine of the log's, in batches, after the
// call has been answered: a call does not wait on the database (an insert
// took ~0.7 ms of an exec's round trip here). A batch gathers what comes
// within batchWindow of its first entry, so that calls made one after
// another share a transaction too (one per call was a third of the
// daemon's CPU under a loop of file stats). A listing waits for what was
// recorded before it, and Close writes what is queued; a daemon killed
// with SIGKILL loses the entries of its last batchWindow.
package audit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"
)

// Store is where entries are kept (store.Store has it).
type Store interface {
	AppendAudit(ctx context.Context, entries ...*store.AuditEntry) error
	ListAudit(ctx context.Context, f store.AuditFilter) ([]*store.AuditEntry, error)
}

// Entry is one call.
type Entry struct {
	ID   int64
	Time time.Time
	// Key is the API key's name; "" for the administrator.
	Key       string
	Workspace string
	User      string
	// Action is the route: "POST /v1/sandboxes/{id}/exec".
	Action string
	// Object is what it acted on: ids, names, a file's path.
	Object string
	Status int
	Code   string
}

// Filter narrows List: Workspace "" is every workspace; Before, when not
// 0, lists entries older than that ID; Limit bounds the count (default
// 100).
type Filter struct {
	Workspace string
	Before    int64
	Limit     int
}

// Sizes of the queue and of the batches written from it, and how long a
// batch waits for more after its first entry.
const (
	queueSize   = 4096 // a full queue makes Record wait: memory stays bounded
	batchSize   = 256
	batchWindow = 20 * time.Millisecond
)

// item is an entry to write, or a barrier to close once what came before
// it is written.
type item struct {
	entry   *store.AuditEntry
	barrier chan struct{}
}

// Log records and lists entries.
type Log struct {
	store Store
	log   *slog.Logger
	queue chan item
	done  chan struct{} // closed when the writer has ended

	mu     sync.RWMutex // held for reading by Record, for writing by Close
	closed bool
}

// New returns a Log over s, writing until Close; log (nil: discard)
// hears of entries that could not be kept.
func New(s Store, log *slog.Logger) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Log{store: s, log: log, queue: make(chan item, queueSize), done: make(chan struct{})}
	go l.write()
	return l
}

// Record appends e. A failure is logged, not returned: the call it
// records has happened already.
func (l *Log) Record(ctx context.Context, e Entry) {
	rec := store.AuditEntry(e)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed { // a call that ended after the daemon's shutdown began
		if err := l.store.AppendAudit(context.WithoutCancel(ctx), &rec); err != nil {
			l.log.Error("audit log", "action", e.Action, "error", err)
		}
		return
	}
	l.queue <- item{entry: &rec}
}

// write writes what is queued, a batch at a time, until Close.
func (l *Log) write() {
	defer close(l.done)
	for it := range l.queue {
		var batch []*store.AuditEntry
		var barriers []chan struct{}
		add := func(it item) {
			if it.barrier != nil {
				barriers = append(barriers, it.barrier)
			} else {
				batch = append(batch, it.entry)
			}
		}
		add(it)
		window := time.NewTimer(batchWindow)
	more:
		// A barrier ends the batch: a listing waits for it.
		for len(batch) < batchSize && len(barriers) == 0 {
			select {
			case it, ok := <-l.queue:
				if !ok {
					break more
				}
				add(it)
			case <-window.C:
				break more
			}
		}
		window.Stop()
		if len(batch) > 0 {
			if err := l.store.AppendAudit(context.Background(), batch...); err != nil {
				l.log.Error("audit log: entries lost", "entries", len(batch), "error", err)
			}
		}
		for _, b := range barriers {
			close(b)
		}
	}
}

// sync waits until what was recorded before it is written.
func (l *Log) sync(ctx context.Context) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil
	}
	b := make(chan struct{})
	l.queue <- item{barrier: b}
	l.mu.RUnlock()
	select {
	case <-b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// List returns entries, newest first, those recorded before it included.
func (l *Log) List(ctx context.Context, f Filter) ([]Entry, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	recs, err := l.store.ListAudit(ctx, store.AuditFilter(f))
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(recs))
	for _, r := range recs {
		out = append(out, Entry(*r))
	}
	return out, nil
}

// Close writes what is queued and ends the writer; entries recorded after
// it are written at once.
func (l *Log) Close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	<-l.done
}
