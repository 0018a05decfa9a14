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

// PutNode inserts or replaces a node's record.
func (d *DB) PutNode(ctx context.Context, n *store.Node) error {
	args, err := sqlrows.NodeArgs(n)
	if err != nil {
		return err
	}
	if _, err := d.pool.Exec(ctx, `INSERT INTO nodes (`+sqlrows.NodeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, state = excluded.state, reason = excluded.reason,
			report = excluded.report, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
			tls_fingerprint = excluded.tls_fingerprint`, args...); err != nil {
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
// sandboxes failed, in one transaction: of several daemons doing it at
// once, the one whose UPDATE finds the node still up does both.
func (d *DB) MarkNodeLost(ctx context.Context, id string, before time.Time, reason string, live []store.State, at time.Time) (marked bool, err error) {
	states := make([]string, len(live))
	for i, s := range live {
		states[i] = string(s)
	}
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE nodes SET state = $1, reason = $2 WHERE id = $3 AND state = $4 AND heartbeat_at < $5`,
			store.NodeLost, reason, id, store.NodeUp, before.UnixNano())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		marked = true
		_, err = tx.Exec(ctx, `UPDATE sandboxes SET state = $1, state_reason = $2, updated_at = $3
			WHERE node = $4 AND state = ANY($5)`, string(store.Error), reason, at.UnixNano(), id, states)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("mark node %s lost: %w", id, err)
	}
	return marked, nil
}

// DeleteNode removes a node's record.
func (d *DB) DeleteNode(ctx context.Context, id string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM nodes WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete node %s: %w", id, err)
	}
	return expectOne(tag, "node %s not found", id)
}

// PublishTemplate records a template's version unless one as new is.
func (d *DB) PublishTemplate(ctx context.Context, t *store.ClusterTemplate) (bool, error) {
	tag, err := d.pool.Exec(ctx, `INSERT INTO cluster_templates (name, version, origin, info, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET version = excluded.version, origin = excluded.origin, info = excluded.info, updated_at = excluded.updated_at
		WHERE excluded.version > cluster_templates.version`, t.Name, t.Version, t.Origin, string(t.Info), t.UpdatedAt.UnixNano())
	if err != nil {
		return false, fmt.Errorf("publish template %s: %w", t.Name, err)
	}
	return tag.RowsAffected() == 1, nil
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
	if _, err := d.pool.Exec(ctx, `DELETE FROM cluster_templates WHERE name = $1`, name); err != nil {
		return fmt.Errorf("unpublish template %s: %w", name, err)
	}
	return nil
}

// SetImage records a suspended sandbox's uploaded image.
func (d *DB) SetImage(ctx context.Context, id, node, image string) error {
	tag, err := d.pool.Exec(ctx, `UPDATE sandboxes SET image = $1 WHERE id = $2 AND node = $3 AND ($1 = '' OR state = $4)`,
		image, id, node, string(store.Suspended))
	if err != nil {
		return fmt.Errorf("set image of sandbox %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return d.whyNot(ctx, id, "record an image of")
}

// MoveSandbox hands a suspended sandbox with an image to another node.
func (d *DB) MoveSandbox(ctx context.Context, id, from, to string, at time.Time) error {
	tag, err := d.pool.Exec(ctx, `UPDATE sandboxes SET node = $1, updated_at = $2 WHERE id = $3 AND node = $4 AND state = $5 AND image != ''`,
		to, at.UnixNano(), id, from, string(store.Suspended))
	if err != nil {
		return fmt.Errorf("move sandbox %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
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
