package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

// AppendEvents records events, in one transaction.
func (d *DB) AppendEvents(ctx context.Context, events ...*store.Event) (err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error says what failed
		}
	}()
	for _, e := range events {
		args, err := sqlrows.EventArgs(e)
		if err != nil {
			return err
		}
		// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
		res, err := tx.ExecContext(ctx, `INSERT INTO events (`+sqlrows.EventColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`, args...)
		if err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		if e.ID, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
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
		WHERE id > ? AND (? = '' OR workspace = ?) AND (? = '' OR sandbox = ?) ORDER BY id LIMIT ?`,
		f.After, f.Workspace, f.Workspace, f.Sandbox, f.Sandbox, limit)
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
		// #nosec G202 -- the table is one of the two above
		if _, err := d.db.ExecContext(ctx, `DELETE FROM `+table+` WHERE at < ?`, before.UnixNano()); err != nil {
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
	// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
	_, err = d.db.ExecContext(ctx, `INSERT INTO webhooks (`+sqlrows.WebhookColumns+`) VALUES (?, ?, ?, ?, ?, ?)`, args...)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return errdefs.AlreadyExists("webhook %s exists already", w.ID)
		}
		return fmt.Errorf("insert webhook %s: %w", w.ID, err)
	}
	return nil
}

// ListWebhooks returns a workspace's webhooks (every workspace's for ""),
// oldest first.
func (d *DB) ListWebhooks(ctx context.Context, ws string) ([]*store.Webhook, error) {
	out, err := query(ctx, d, sqlrows.ScanWebhook, `SELECT `+sqlrows.WebhookColumns+` FROM webhooks
		WHERE ? = '' OR workspace = ? ORDER BY created_at, id`, ws, ws)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// DeleteWebhook removes a workspace's webhook and its deliveries.
func (d *DB) DeleteWebhook(ctx context.Context, ws, id string) (err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error says what failed
		}
	}()
	res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND workspace = ?`, id, ws)
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errdefs.NotFound("webhook %s not found", id)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM deliveries WHERE webhook = ?`, id); err != nil {
		return fmt.Errorf("delete deliveries of webhook %s: %w", id, err)
	}
	return tx.Commit()
}

// AppendDelivery records a delivery's attempt.
func (d *DB) AppendDelivery(ctx context.Context, dl *store.Delivery) error {
	// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
	res, err := d.db.ExecContext(ctx, `INSERT INTO deliveries (`+sqlrows.DeliveryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`, sqlrows.DeliveryArgs(dl)...)
	if err != nil {
		return fmt.Errorf("record delivery to webhook %s: %w", dl.Webhook, err)
	}
	dl.ID, err = res.LastInsertId()
	return err
}

// ListDeliveries returns a webhook's latest deliveries, newest first.
func (d *DB) ListDeliveries(ctx context.Context, webhook string, limit int) ([]*store.Delivery, error) {
	if limit <= 0 {
		limit = 100
	}
	out, err := query(ctx, d, sqlrows.ScanDelivery, `SELECT id, `+sqlrows.DeliveryColumns+` FROM deliveries
		WHERE webhook = ? ORDER BY id DESC LIMIT ?`, webhook, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of webhook %s: %w", webhook, err)
	}
	if out == nil {
		out = []*store.Delivery{}
	}
	return out, nil
}
