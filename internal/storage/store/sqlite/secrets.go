package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

// The secrets' methods, which internal/trust/secrets's vault uses (its Store).
// Values are stored only sealed; nothing here sees a key or a plaintext.

// PutSecret inserts s, or updates the secret of its workspace, user and
// name. An update keeps the stored CreatedAt, and the stored Placeholder
// unless s gives one (a secret that is no longer InjectProxy has none).
// s's CreatedAt and Placeholder are set to what is stored.
func (d *DB) PutSecret(ctx context.Context, s *store.Secret) error {
	args, err := sqlrows.SecretArgs(s)
	if err != nil {
		return err
	}
	var created int64
	err = d.db.QueryRowContext(ctx, `INSERT INTO secrets (`+sqlrows.SecretColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workspace, user, name) DO UPDATE SET
			description = excluded.description,
			inject      = excluded.inject,
			hosts       = excluded.hosts,
			query       = excluded.query,
			placeholder = CASE
				WHEN excluded.placeholder <> '' THEN excluded.placeholder
				WHEN excluded.inject = 'proxy' THEN secrets.placeholder
				ELSE '' END,
			sealed      = excluded.sealed,
			updated_at  = excluded.updated_at
		RETURNING created_at, placeholder`, args...).Scan(&created, &s.Placeholder)
	if err != nil {
		return fmt.Errorf("put %s: %w", sqlrows.DescribeSecret(s.Workspace, s.User, s.Name), err)
	}
	s.CreatedAt = sqlrows.Time(created)
	return nil
}

// GetSecret returns one secret (user "" for the workspace's own);
// ErrNotFound if there is none.
func (d *DB) GetSecret(ctx context.Context, workspace, user, name string) (*store.Secret, error) {
	out, err := query(ctx, d, sqlrows.ScanSecret, `SELECT `+sqlrows.SecretColumns+` FROM secrets WHERE workspace = ? AND user = ? AND name = ?`,
		workspace, user, name)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", sqlrows.DescribeSecret(workspace, user, name), err)
	}
	if len(out) == 0 {
		return nil, sqlrows.SecretNotFound(workspace, user, name)
	}
	return out[0], nil
}

// ListSecrets returns the secrets of workspace, of every scope ("" for
// every workspace's), by workspace, user and name.
func (d *DB) ListSecrets(ctx context.Context, workspace string) ([]*store.Secret, error) {
	q := `SELECT ` + sqlrows.SecretColumns + ` FROM secrets`
	var args []any
	if workspace != "" {
		q += ` WHERE workspace = ?`
		args = append(args, workspace)
	}
	out, err := query(ctx, d, sqlrows.ScanSecret, q+` ORDER BY workspace, user, name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret removes one secret; ErrNotFound if there is none.
func (d *DB) DeleteSecret(ctx context.Context, workspace, user, name string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM secrets WHERE workspace = ? AND user = ? AND name = ?`, workspace, user, name)
	if err != nil {
		return fmt.Errorf("delete %s: %w", sqlrows.DescribeSecret(workspace, user, name), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return sqlrows.SecretNotFound(workspace, user, name)
	}
	return nil
}

// VaultCheck returns the vault's key check, or nil when none was set.
func (d *DB) VaultCheck(ctx context.Context) ([]byte, error) {
	var check []byte
	err := d.db.QueryRowContext(ctx, `SELECT key_check FROM vault WHERE id = 1`).Scan(&check)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the vault's key check: %w", err)
	}
	return check, nil
}

// SetVaultCheck sets (or replaces) the vault's key check.
func (d *DB) SetVaultCheck(ctx context.Context, check []byte) error {
	if len(check) == 0 {
		return fmt.Errorf("set the vault's key check: empty")
	}
	_, err := d.db.ExecContext(ctx, `INSERT INTO vault (id, key_check) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET key_check = excluded.key_check`, check)
	if err != nil {
		return fmt.Errorf("set the vault's key check: %w", err)
	}
	return nil
}

// ResealAll replaces the Sealed of every secret in secrets, and the key
// check, in one transaction: a master key's rotation, which must leave
// every value sealed under one key. Nothing else of a record changes. It
// fails with ErrConflict, and changes nothing, unless secrets are exactly
// the secrets stored, each as last updated (its UpdatedAt): a secret set
// or deleted since they were read would otherwise be left under the old
// key.
func (d *DB) ResealAll(ctx context.Context, secrets []*store.Secret, check []byte) (err error) {
	if len(check) == 0 {
		return fmt.Errorf("reseal secrets: no key check")
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reseal secrets: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	changed := errdefs.Conflict("the secrets changed while they were resealed; nothing was changed, try again")
	var stored int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM secrets`).Scan(&stored); err != nil {
		return fmt.Errorf("reseal secrets: %w", err)
	}
	if stored != len(secrets) {
		return changed
	}
	for _, s := range secrets {
		if len(s.Sealed) == 0 {
			return fmt.Errorf("reseal %s: no sealed value", sqlrows.DescribeSecret(s.Workspace, s.User, s.Name))
		}
		res, err := tx.ExecContext(ctx, `UPDATE secrets SET sealed = ?
			WHERE workspace = ? AND user = ? AND name = ? AND updated_at = ?`,
			s.Sealed, s.Workspace, s.User, s.Name, s.UpdatedAt.UnixNano())
		if err != nil {
			return fmt.Errorf("reseal %s: %w", sqlrows.DescribeSecret(s.Workspace, s.User, s.Name), err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return changed
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO vault (id, key_check) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET key_check = excluded.key_check`, check); err != nil {
		return fmt.Errorf("reseal secrets: set the key check: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reseal secrets: %w", err)
	}
	return nil
}
