// Package events is the sandboxes' lifecycle events: a hook of the kernel
// (hook.Changer, hook.Ticker) that makes each change of a sandbox's state
// an event with the reason it happened (a stable code: idle_timeout, oom,
// max_lifetime, …), writes the events to the store in order, and lets
// callers read and follow them (GET /v1/events) and the webhooks hear
// them. A sandbox nearing the end of its max lifetime gets an eviction
// notice first. Other parts of the daemon add events of their own (a
// service's status, a process's exit) with Emit.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The event types.
const (
	Created        = "sandbox.created"
	Started        = "sandbox.started" // a stopped or failed sandbox, started again
	Paused         = "sandbox.paused"
	Suspended      = "sandbox.suspended"
	Stopped        = "sandbox.stopped"
	Resumed        = "sandbox.resumed" // a suspended or paused sandbox, running again
	Deleted        = "sandbox.deleted"
	Errored        = "sandbox.errored"
	EvictionNotice = "sandbox.eviction_notice"
	ServiceStatus  = "service.status"
	ProcessExited  = "process.exited"
)

// Types are every event type, in the lifecycle's order.
var Types = []string{Created, Started, Paused, Suspended, Stopped, Resumed, Deleted, Errored, EvictionNotice, ServiceStatus, ProcessExited}

// Store is what the log keeps its events in, and reads the sandboxes from.
type Store interface {
	store.Events
	ListSandboxes(ctx context.Context) ([]*store.Sandbox, error)
}

// Defaults of Config.
const (
	DefaultNotice = 5 * time.Minute
	DefaultKeep   = 7 * 24 * time.Hour
	DefaultPoll   = time.Second
)

// Config configures a Log.
type Config struct {
	Store Store
	// Node is this daemon's node: it gives eviction notices for the
	// sandboxes it holds.
	Node string
	// Notice is how long before the end of its max lifetime a sandbox
	// gets its eviction notice (DefaultNotice when 0).
	Notice time.Duration
	// Keep is how long events are kept (DefaultKeep when 0).
	Keep time.Duration
	// Poll is how often a follower looks for events other daemons wrote
	// (DefaultPoll when 0); this one's wake it at once.
	Poll   time.Duration
	Logger *slog.Logger
}

// Log is the events' hook and their reader.
type Log struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	queue   []*store.Event         // made, not written yet
	queued  chan struct{}          // signals the writer (capacity 1)
	wrote   chan struct{}          // closed, and made anew, at each write
	resumes map[string]store.State // a resuming sandbox's state before
	noticed map[string]time.Time   // sandboxes given their eviction notice, and the end it said
	subs    []func([]*store.Event) // told of each batch written
	looked  time.Time              // the last look for sandboxes near their end
	pruned  time.Time
}

// New returns a Log; Run writes its events.
func New(cfg Config) *Log {
	if cfg.Notice <= 0 {
		cfg.Notice = DefaultNotice
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	l := &Log{cfg: cfg, log: cfg.Logger, queued: make(chan struct{}, 1), wrote: make(chan struct{}),
		resumes: map[string]store.State{}, noticed: map[string]time.Time{}}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l
}

// Name names the hook.
func (l *Log) Name() string { return "events" }

// Changed makes a change of a sandbox's state an event, if it is one a
// caller hears of (hook.Changer): not the steps under way.
func (l *Log) Changed(c hook.Change) {
	sb := c.Sandbox
	typ := ""
	l.mu.Lock()
	switch sb.State {
	case store.Running:
		switch was := c.From; {
		case was == store.Creating:
			typ = Created
		case was == store.Resuming && (l.resumes[sb.ID] == store.Stopped || l.resumes[sb.ID] == store.Error):
			typ = Started
		default:
			typ = Resumed
		}
		delete(l.resumes, sb.ID)
	case store.Resuming:
		l.resumes[sb.ID] = c.From
	case store.Paused:
		typ = Paused
	case store.Suspended, store.Stopped:
		if c.From == store.Resuming { // a resume that failed: it stays as it was
			delete(l.resumes, sb.ID)
			break
		}
		typ = Suspended
		if sb.State == store.Stopped {
			typ = Stopped
		}
	case store.Error:
		typ = Errored
		delete(l.resumes, sb.ID)
	case store.Deleting:
		typ = Deleted
		delete(l.resumes, sb.ID)
		delete(l.noticed, sb.ID)
	}
	l.mu.Unlock()
	if typ == "" {
		return
	}
	msg := c.Reason
	if c.Cause.By != "" {
		msg += " (by " + c.Cause.By + ")"
	}
	l.Emit(&store.Event{
		Time: time.Now().UTC(), Workspace: sb.Workspace, Sandbox: sb.ID, Type: typ, Reason: c.Cause.Code, Message: msg,
		Data: map[string]string{"template": sb.Template, "runtime": sb.Backend},
	})
}

// Emit adds ev to the log; Run writes it. It does not block.
func (l *Log) Emit(ev *store.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	l.mu.Lock()
	l.queue = append(l.queue, ev)
	l.mu.Unlock()
	select {
	case l.queued <- struct{}{}:
	default:
	}
}

// Subscribe has fn told of each batch of events once written, in order,
// from the writer's goroutine: it must not block (the webhooks queue
// what they are told).
func (l *Log) Subscribe(fn func([]*store.Event)) {
	l.mu.Lock()
	l.subs = append(l.subs, fn)
	l.mu.Unlock()
}

// maxQueue bounds the events waiting to be written while the store
// fails: the oldest go first.
const maxQueue = 10000

// Run writes the events as they come, until ctx ends (then what is queued).
func (l *Log) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			l.write(context.WithoutCancel(ctx))
			return nil
		case <-l.queued:
			for !l.write(ctx) { // the store failed: again in a while
				select {
				case <-ctx.Done():
					l.write(context.WithoutCancel(ctx))
					return nil
				case <-time.After(time.Second):
				}
			}
		}
	}
}

// write appends the queued events, and tells the followers and the
// subscribers; false if the store refused them (they stay queued).
func (l *Log) write(ctx context.Context) bool {
	l.mu.Lock()
	batch := l.queue
	l.queue = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	if err := l.cfg.Store.AppendEvents(ctx, batch...); err != nil {
		l.log.Error("write events: they are kept to try again", "events", len(batch), "error", err)
		l.mu.Lock()
		l.queue = append(batch, l.queue...)
		if over := len(l.queue) - maxQueue; over > 0 {
			l.log.Error("events dropped: the store has refused them for too long", "dropped", over)
			l.queue = l.queue[over:]
		}
		l.mu.Unlock()
		return false
	}
	l.mu.Lock()
	close(l.wrote)
	l.wrote = make(chan struct{})
	subs := l.subs
	l.mu.Unlock()
	for _, fn := range subs {
		fn(batch)
	}
	return true
}

// List returns the events f asks for, oldest first.
func (l *Log) List(ctx context.Context, f store.EventFilter) ([]*store.Event, error) {
	return l.cfg.Store.ListEvents(ctx, f)
}

// Wait returns the events f asks for, waiting until there is one, or
// ctx ends.
func (l *Log) Wait(ctx context.Context, f store.EventFilter) ([]*store.Event, error) {
	for {
		l.mu.Lock()
		wrote := l.wrote
		l.mu.Unlock()
		evs, err := l.cfg.Store.ListEvents(ctx, f)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wrote:
		case <-time.After(l.cfg.Poll):
		}
	}
}

// How often Tick looks for sandboxes near their end, and prunes.
const (
	noticeEvery = 5 * time.Second
	pruneEvery  = time.Hour
)

// Tick gives eviction notices to the sandboxes of this node whose max
// lifetime ends within Notice, once each, looking every noticeEvery, and
// prunes old events hourly (hook.Ticker).
func (l *Log) Tick(ctx context.Context, now time.Time) {
	l.mu.Lock()
	due := now.Sub(l.looked) >= noticeEvery
	if due {
		l.looked = now
	}
	l.mu.Unlock()
	if !due {
		return
	}
	recs, err := l.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		l.log.Warn("eviction notices: list sandboxes", "error", err)
		return
	}
	seen := map[string]bool{}
	for _, rec := range recs {
		if rec.Node != "" && l.cfg.Node != "" && rec.Node != l.cfg.Node || rec.ExpiresAt.IsZero() || rec.State == store.Deleting {
			continue
		}
		seen[rec.ID] = true
		left := rec.ExpiresAt.Sub(now)
		if left > l.cfg.Notice || left <= 0 {
			continue
		}
		l.mu.Lock()
		given := l.noticed[rec.ID].Equal(rec.ExpiresAt)
		l.noticed[rec.ID] = rec.ExpiresAt
		l.mu.Unlock()
		if given {
			continue
		}
		l.Emit(&store.Event{
			Time: now.UTC(), Workspace: rec.Workspace, Sandbox: rec.ID, Type: EvictionNotice, Reason: hook.CauseLifetime,
			Message: fmt.Sprintf("deleted at %s, the end of its max lifetime, in %s: keep what it holds elsewhere, or extend it (PATCH max_lifetime_s)",
				rec.ExpiresAt.UTC().Format(time.RFC3339), left.Round(time.Second)),
			Data: map[string]string{"expires_at": rec.ExpiresAt.UTC().Format(time.RFC3339)},
		})
	}
	l.mu.Lock()
	for id := range l.noticed {
		if !seen[id] {
			delete(l.noticed, id)
		}
	}
	prune := now.Sub(l.pruned) >= pruneEvery
	if prune {
		l.pruned = now
	}
	l.mu.Unlock()
	if prune {
		if err := l.cfg.Store.PruneEvents(ctx, now.Add(-l.cfg.Keep)); err != nil {
			l.log.Warn("prune old events", "error", err)
		}
	}
}
