package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

// eventsLock is the advisory lock appends of events take: with it, events
// commit in the order of their IDs, so a reader that has every event up to
// an ID never finds one below it later (identities are handed out before
// the commits, which otherwise may come in another order).
const eventsLock = 0x68757463685f6576 // "hutch_ev"

// AppendEvents records events, in one transaction.
func (d *DB) AppendEvents(ctx context.Context, events ...*store.Event) error {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(eventsLock)); err != nil {
			return err
		}
		for _, e := range events {
			args, err := sqlrows.EventArgs(e)
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `INSERT INTO events (`+sqlrows.EventColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, args...).Scan(&e.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	return nil
}

// ListEvents returns events, oldest first.
func (d *DB) ListEvents(ctx context.Context, f store.EventFilter) ([]*store.Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	out, err := query(ctx, d, sqlrows.ScanEvent, `SELECT id, `+sqlrows.EventColumns+` FROM events
		WHERE id > $1 AND ($2::text = '' OR workspace = $2) AND ($3::text = '' OR sandbox = $3) ORDER BY id LIMIT $4`,
		f.After, f.Workspace, f.Sandbox, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if out == nil {
		out = []*store.Event{}
	}
	return out, nil
}

// PruneEvents removes the events and deliveries of before before.
func (d *DB) PruneEvents(ctx context.Context, before time.Time) error {
	for _, table := range []string{"events", "deliveries"} {
		if _, err := d.pool.Exec(ctx, `DELETE FROM `+table+` WHERE at < $1`, before.UnixNano()); err != nil {
			return fmt.Errorf("prune %s: %w", table, err)
		}
	}
	return nil
}

// CreateWebhook records a webhook.
func (d *DB) CreateWebhook(ctx context.Context, w *store.Webhook) error {
	args, err := sqlrows.WebhookArgs(w)
	if err != nil {
		return err
	}
	_, err = d.pool.Exec(ctx, `INSERT INTO webhooks (`+sqlrows.WebhookColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`, args...)
	if _, ok := violated(err, uniqueViolation); ok {
		return errdefs.AlreadyExists("webhook %s exists already", w.ID)
	}
	if err != nil {
		return fmt.Errorf("insert webhook %s: %w", w.ID, err)
	}
	return nil
}

// ListWebhooks returns a workspace's webhooks (every workspace's for ""),
// oldest first.
func (d *DB) ListWebhooks(ctx context.Context, ws string) ([]*store.Webhook, error) {
	out, err := query(ctx, d, sqlrows.ScanWebhook, `SELECT `+sqlrows.WebhookColumns+` FROM webhooks
		WHERE $1::text = '' OR workspace = $1 ORDER BY created_at, id`, ws)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// DeleteWebhook removes a workspace's webhook and its deliveries.
func (d *DB) DeleteWebhook(ctx context.Context, ws, id string) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM webhooks WHERE id = $1 AND workspace = $2`, id, ws)
		if err != nil {
			return fmt.Errorf("delete webhook %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return errdefs.NotFound("webhook %s not found", id)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE webhook = $1`, id); err != nil {
			return fmt.Errorf("delete deliveries of webhook %s: %w", id, err)
		}
		return nil
	})
}

// AppendDelivery records a delivery's attempt.
func (d *DB) AppendDelivery(ctx context.Context, dl *store.Delivery) error {
	if err := d.pool.QueryRow(ctx, `INSERT INTO deliveries (`+sqlrows.DeliveryColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, sqlrows.DeliveryArgs(dl)...).Scan(&dl.ID); err != nil {
		return fmt.Errorf("record delivery to webhook %s: %w", dl.Webhook, err)
	}
	return nil
}

// ListDeliveries returns a webhook's latest deliveries, newest first.
func (d *DB) ListDeliveries(ctx context.Context, webhook string, limit int) ([]*store.Delivery, error) {
	if limit <= 0 {
		limit = 100
	}
	out, err := query(ctx, d, sqlrows.ScanDelivery, `SELECT id, `+sqlrows.DeliveryColumns+` FROM deliveries
		WHERE webhook = $1 ORDER BY id DESC LIMIT $2`, webhook, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of webhook %s: %w", webhook, err)
	}
	if out == nil {
		out = []*store.Delivery{}
	}
	return out, nil
}
