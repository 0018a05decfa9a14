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

// PutNode inserts or replaces a node's record.
func (d *DB) PutNode(ctx context.Context, n *store.Node) error {
	args, err := sqlrows.NodeArgs(n)
	if err != nil {
		return err
	}
	// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
	if _, err := d.db.ExecContext(ctx, `INSERT OR REPLACE INTO nodes (`+sqlrows.NodeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, args...); err != nil {
		return fmt.Errorf("put node %s: %w", n.ID, err)
	}
	return nil
}

// ListNodes returns every node, by ID.
func (d *DB) ListNodes(ctx context.Context) ([]*store.Node, error) {
	out, err := query(ctx, d, sqlrows.ScanNode, `SELECT `+sqlrows.NodeColumns+` FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// MarkNodeLost marks a node that stopped beating lost, and its live
// sandboxes failed, in one transaction.
func (d *DB) MarkNodeLost(ctx context.Context, id string, before time.Time, reason string, live []store.State, at time.Time) (marked bool, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || !marked {
			_ = tx.Rollback() // the error says what failed; or there was nothing to do
		}
	}()
	res, err := tx.ExecContext(ctx, `UPDATE nodes SET state = ?, reason = ? WHERE id = ? AND state = ? AND heartbeat_at < ?`,
		store.NodeLost, reason, id, store.NodeUp, before.UnixNano())
	if err != nil {
		return false, fmt.Errorf("mark node %s lost: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	if len(live) > 0 {
		args := []any{string(store.Error), reason, at.UnixNano(), id}
		for _, s := range live {
			args = append(args, string(s))
		}
		// #nosec G202 -- only placeholders are added, one per state
		if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET state = ?, state_reason = ?, updated_at = ?
			WHERE node = ? AND state IN (?`+strings.Repeat(", ?", len(live)-1)+`)`, args...); err != nil {
			return false, fmt.Errorf("fail the sandboxes of lost node %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

// DeleteNode removes a node's record.
func (d *DB) DeleteNode(ctx context.Context, id string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM nodes WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete node %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = errdefs.NotFound("node %s not found", id)
		}
		return err
	}
	return nil
}

// PublishTemplate records a template's version unless one as new is.
func (d *DB) PublishTemplate(ctx context.Context, t *store.ClusterTemplate) (bool, error) {
	res, err := d.db.ExecContext(ctx, `INSERT INTO cluster_templates (name, version, origin, info, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET version = excluded.version, origin = excluded.origin, info = excluded.info, updated_at = excluded.updated_at
		WHERE excluded.version > cluster_templates.version`, t.Name, t.Version, t.Origin, string(t.Info), t.UpdatedAt.UnixNano())
	if err != nil {
		return false, fmt.Errorf("publish template %s: %w", t.Name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ListClusterTemplates returns every template's record, by name.
func (d *DB) ListClusterTemplates(ctx context.Context) ([]*store.ClusterTemplate, error) {
	out, err := query(ctx, d, sqlrows.ScanClusterTemplate, `SELECT name, version, origin, info, updated_at FROM cluster_templates ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return out, nil
}

// UnpublishTemplate removes a template's record.
func (d *DB) UnpublishTemplate(ctx context.Context, name string) error {
	if _, err := d.db.ExecContext(ctx, `DELETE FROM cluster_templates WHERE name = ?`, name); err != nil {
		return fmt.Errorf("unpublish template %s: %w", name, err)
	}
	return nil
}

// SetImage records a suspended sandbox's uploaded image.
func (d *DB) SetImage(ctx context.Context, id, node, image string) error {
	res, err := d.db.ExecContext(ctx, `UPDATE sandboxes SET image = ? WHERE id = ? AND node = ? AND (? = '' OR state = ?)`,
		image, id, node, image, string(store.Suspended))
	if err != nil {
		return fmt.Errorf("set image of sandbox %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return d.whyNot(ctx, id, "record an image of")
}

// MoveSandbox hands a suspended sandbox with an image to another node.
func (d *DB) MoveSandbox(ctx context.Context, id, from, to string, at time.Time) error {
	res, err := d.db.ExecContext(ctx, `UPDATE sandboxes SET node = ?, updated_at = ? WHERE id = ? AND node = ? AND state = ? AND image != ''`,
		to, at.UnixNano(), id, from, string(store.Suspended))
	if err != nil {
		return fmt.Errorf("move sandbox %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return d.whyNot(ctx, id, "move")
}

// whyNot says why a conditional change of sandbox id did not apply.
func (d *DB) whyNot(ctx context.Context, id, what string) error {
	sb, err := d.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	return errdefs.Conflict("cannot %s sandbox %s: it is %s on node %q, with image %q", what, id, sb.State, sb.Node, sb.Image)
}
