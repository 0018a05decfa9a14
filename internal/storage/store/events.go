package store

import (
	"context"
	"time"
)

// Events is the sandboxes' lifecycle events, kept for callers to read and
// follow (GET /v1/events), and the webhooks that are sent them, with
// what each delivery got.
type Events interface {
	// AppendEvents records events, in one transaction, setting their
	// IDs: ascending, in the order given, and after every ID before.
	AppendEvents(ctx context.Context, events ...*Event) error
	// ListEvents returns events oldest first, as f narrows them.
	ListEvents(ctx context.Context, f EventFilter) ([]*Event, error)
	// PruneEvents removes the events of before before, and the
	// deliveries of before too.
	PruneEvents(ctx context.Context, before time.Time) error

	// CreateWebhook records w; ErrAlreadyExists if its ID is taken.
	CreateWebhook(ctx context.Context, w *Webhook) error
	// ListWebhooks returns workspace ws's webhooks ("": every
	// workspace's), oldest first.
	ListWebhooks(ctx context.Context, ws string) ([]*Webhook, error)
	// DeleteWebhook removes workspace ws's webhook id, and its
	// deliveries; ErrNotFound if it has none of that ID.
	DeleteWebhook(ctx context.Context, ws, id string) error
	// AppendDelivery records an attempt to deliver an event, setting its
	// ID.
	AppendDelivery(ctx context.Context, d *Delivery) error
	// ListDeliveries returns webhook id's latest deliveries, newest first,
	// at most limit (100 when 0).
	ListDeliveries(ctx context.Context, webhook string, limit int) ([]*Delivery, error)
}

// Event is something that happened to a sandbox (or to what runs in it).
type Event struct {
	ID        int64
	Time      time.Time
	Workspace string
	Sandbox   string
	// Type is what happened: sandbox.created, sandbox.suspended, …
	// (internal/core/events).
	Type string
	// Reason is why, as a stable code (hook.Cause's); Message says it to
	// a person.
	Reason  string
	Message string
	// Data is more about it, by name (the template, a process's exit
	// code); nil: nothing.
	Data map[string]string
}

// EventFilter narrows ListEvents: the events after ID After, of
// Workspace ("": every one), of Sandbox ("": every one), at most Limit
// (100 when 0).
type EventFilter struct {
	After     int64
	Workspace string
	Sandbox   string
	Limit     int
}

// Webhook is a URL a workspace's events are posted to, signed with its
// secret.
type Webhook struct {
	ID        string
	Workspace string
	URL       string
	// Types are the event types it is sent; empty: all of them.
	Types []string
	// SealedSecret is its signing secret, sealed by the daemon (never
	// kept in the clear).
	SealedSecret []byte
	CreatedAt    time.Time
}

// Delivery is one attempt to post an event to a webhook.
type Delivery struct {
	ID      int64
	Webhook string
	Event   int64
	// Attempt counts from 1.
	Attempt int
	Time    time.Time
	// Status is the HTTP status the receiver answered (0: none, Error
	// says why).
	Status   int
	Error    string
	Duration time.Duration
}
