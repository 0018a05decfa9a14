// Package audit keeps the audit log: who (key, workspace, user) did what
// to which object, when, and how it ended, for every call that changes
// state or reads a file or a secret's existence. Entries are appended and
// never changed (the store refuses updates and deletes); they hold names
// and ids, never a request's body, so no secret's value and no file's
// content reaches the log. A service beside the core: the API records
// its calls here.
package audit

import (
	"context"
	"log/slog"
	"time"

	"github.com/hutchdev/hutch/internal/store"
)

// Store is where entries are kept (store.Store has it).
type Store interface {
	AppendAudit(ctx context.Context, e *store.AuditEntry) error
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

// Log records and lists entries.
type Log struct {
	store Store
	log   *slog.Logger
}

// New returns a Log over s; log (nil: discard) hears of entries that
// could not be kept.
func New(s Store, log *slog.Logger) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Log{store: s, log: log}
}

// Record appends e. A failure is logged, not returned: the call it
// records has happened already.
func (l *Log) Record(ctx context.Context, e Entry) {
	rec := store.AuditEntry(e)
	if err := l.store.AppendAudit(context.WithoutCancel(ctx), &rec); err != nil {
		l.log.Error("audit log", "action", e.Action, "error", err)
	}
}

// List returns entries, newest first.
func (l *Log) List(ctx context.Context, f Filter) ([]Entry, error) {
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
