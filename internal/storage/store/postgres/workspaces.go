package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

// EnsureWorkspace records workspace name if it is not yet.
func (d *DB) EnsureWorkspace(ctx context.Context, name string, at time.Time) (*store.Workspace, error) {
	if _, err := d.pool.Exec(ctx, `INSERT INTO workspaces (name, created_at, updated_at) VALUES ($1, $2, $2)
		ON CONFLICT (name) DO NOTHING`, name, at.UnixNano()); err != nil {
		return nil, fmt.Errorf("record workspace %s: %w", name, err)
	}
	return d.GetWorkspace(ctx, name)
}

// GetWorkspace returns one workspace.
func (d *DB) GetWorkspace(ctx context.Context, name string) (*store.Workspace, error) {
	w, err := sqlrows.ScanWorkspace(d.pool.QueryRow(ctx, `SELECT `+sqlrows.WorkspaceColumns+` FROM workspaces WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errdefs.NotFound("workspace %s not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get workspace %s: %w", name, err)
	}
	return w, nil
}

// ListWorkspaces returns every workspace, by name.
func (d *DB) ListWorkspaces(ctx context.Context) ([]*store.Workspace, error) {
	out, err := query(ctx, d, sqlrows.ScanWorkspace, `SELECT `+sqlrows.WorkspaceColumns+` FROM workspaces ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

// SetQuota sets a workspace's quota, making the workspace if absent.
func (d *DB) SetQuota(ctx context.Context, name string, q store.Quota, at time.Time) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	if _, err := d.pool.Exec(ctx, `INSERT INTO workspaces (name, quota, created_at, updated_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (name) DO UPDATE SET quota = excluded.quota, updated_at = excluded.updated_at`,
		name, string(b), at.UnixNano()); err != nil {
		return fmt.Errorf("set quota of workspace %s: %w", name, err)
	}
	return nil
}

// AddSandboxTime adds to a workspace's sandbox time of one day, in one
// statement: additions racing each wait for the other's row.
func (d *DB) AddSandboxTime(ctx context.Context, ws, day string, dur time.Duration) error {
	if _, err := d.pool.Exec(ctx, `INSERT INTO workspace_usage (workspace, day, seconds) VALUES ($1, $2, $3)
		ON CONFLICT (workspace, day) DO UPDATE SET seconds = workspace_usage.seconds + excluded.seconds`, ws, day, dur.Seconds()); err != nil {
		return fmt.Errorf("add sandbox time of workspace %s: %w", ws, err)
	}
	return nil
}

// SandboxTime is a workspace's sandbox time of one day.
func (d *DB) SandboxTime(ctx context.Context, ws, day string) (time.Duration, error) {
	var s float64
	err := d.pool.QueryRow(ctx, `SELECT seconds FROM workspace_usage WHERE workspace = $1 AND day = $2`, ws, day).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sandbox time of workspace %s: %w", ws, err)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// AppendAudit records audit entries, in one transaction.
func (d *DB) AppendAudit(ctx context.Context, entries ...*store.AuditEntry) error {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		for _, e := range entries {
			if err := tx.QueryRow(ctx, `INSERT INTO audit (`+sqlrows.AuditColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`, sqlrows.AuditArgs(e)...).Scan(&e.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append to the audit log: %w", err)
	}
	return nil
}

// ListAudit returns audit entries, newest first.
func (d *DB) ListAudit(ctx context.Context, f store.AuditFilter) ([]*store.AuditEntry, error) {
	before := f.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	out, err := query(ctx, d, sqlrows.ScanAuditEntry, `SELECT id, `+sqlrows.AuditColumns+` FROM audit
		WHERE id < $1 AND ($2::text = '' OR workspace = $2) ORDER BY id DESC LIMIT $3`, before, f.Workspace, limit)
	if err != nil {
		return nil, fmt.Errorf("list the audit log: %w", err)
	}
	if out == nil {
		out = []*store.AuditEntry{} // an empty log lists as [], not null
	}
	return out, nil
}
