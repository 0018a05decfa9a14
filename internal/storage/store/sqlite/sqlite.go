// Package sqlite is the Store on an embedded SQLite database (modernc.org's
// pure-Go SQLite, so the binary stays static), in WAL mode, with its schema
// in store/migrations, compiled into the binary.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/migrations"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

var _ store.Store = (*DB)(nil)

// DB is a store.Store on one SQLite file.
type DB struct {
	db *stmtDB
}

// Open opens (creating if needed) the database at path and migrates it.
func Open(ctx context.Context, path string) (*DB, error) {
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One writer at a time is SQLite's model; a single connection also keeps
	// the pragmas above in force for every statement.
	db.SetMaxOpenConns(1)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	return &DB{db: &stmtDB{DB: db}}, nil
}

// migrate applies every migration newer than the database's. SQLite's
// databases record theirs in user_version, as they did before the
// migrations were shared: the count of migrations applied.
func migrate(ctx context.Context, db *sql.DB) error {
	return migrations.Run(ctx, migrations.SQLite, target{db})
}

// target is a database being migrated.
type target struct{ db *sql.DB }

func (t target) Version(ctx context.Context) (int, error) {
	var v int
	err := t.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

// Apply runs m and sets user_version in one transaction.
func (t target) Apply(ctx context.Context, m migrations.Migration) (err error) {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error says what failed
		}
	}()
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
		return err
	}
	return tx.Commit()
}

func (d *DB) Close() error { return d.db.Close() }

func (d *DB) CreateSandbox(ctx context.Context, sb *store.Sandbox) error {
	args, err := sqlrows.SandboxArgs(sb)
	if err != nil {
		return err
	}
	// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
	_, err = d.db.ExecContext(ctx, `INSERT INTO sandboxes (`+sqlrows.SandboxColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed: sandboxes.workspace, sandboxes.key") {
			return errdefs.AlreadyExists("a sandbox with key %q exists already", sb.Key)
		}
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return errdefs.AlreadyExists("sandbox %s already exists", sb.ID)
		}
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	return nil
}

func (d *DB) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := sqlrows.ScanSandbox(d.db.QueryRowContext(ctx, `SELECT `+sqlrows.SandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	return sb, nil
}

// GetSandboxByKey returns workspace ws's sandbox with key; ErrNotFound if
// none.
func (d *DB) GetSandboxByKey(ctx context.Context, ws, key string) (*store.Sandbox, error) {
	sb, err := sqlrows.ScanSandbox(d.db.QueryRowContext(ctx, `SELECT `+sqlrows.SandboxColumns+` FROM sandboxes WHERE workspace = ? AND key = ?`, ws, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.NotFound("no sandbox has key %q", key)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox by key: %w", err)
	}
	return sb, nil
}

func (d *DB) ListSandboxes(ctx context.Context) ([]*store.Sandbox, error) {
	out, err := query(ctx, d, sqlrows.ScanSandbox, `SELECT `+sqlrows.SandboxColumns+` FROM sandboxes ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// ChangeState applies c if the sandbox's state is one of c.From, in one
// statement: two changes racing cannot both apply.
func (d *DB) ChangeState(ctx context.Context, c store.StateChange) error {
	if len(c.From) == 0 {
		return fmt.Errorf("change state of sandbox %s: no state to change from", c.ID)
	}
	var handle any // NULL: unchanged
	if c.Handle != nil {
		handle = c.Handle
	}
	args := []any{string(c.To), c.Reason, c.At.UnixNano(), handle, c.To == store.Deleting, c.ID}
	for _, f := range c.From {
		args = append(args, string(f))
	}
	// #nosec G202 -- only placeholders are added, one per state to change from
	res, err := d.db.ExecContext(ctx, `UPDATE sandboxes SET state = ?, state_reason = ?, updated_at = ?,
		handle = coalesce(?, handle), key = CASE WHEN ? THEN NULL ELSE key END
		WHERE id = ? AND state IN (?`+strings.Repeat(", ?", len(c.From)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("change state of sandbox %s: %w", c.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var state store.State
	err = d.db.QueryRowContext(ctx, `SELECT state FROM sandboxes WHERE id = ?`, c.ID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return errdefs.NotFound("sandbox %s not found", c.ID)
	}
	if err != nil {
		return fmt.Errorf("change state of sandbox %s: %w", c.ID, err)
	}
	from := make([]string, len(c.From))
	for i, f := range c.From {
		from[i] = string(f)
	}
	return errdefs.Conflict("sandbox %s is %s, not %s", c.ID, state, strings.Join(from, " or "))
}

// SetTimers sets a sandbox's timers and nothing else.
func (d *DB) SetTimers(ctx context.Context, id string, t store.Timers) error {
	res, err := d.db.ExecContext(ctx, `UPDATE sandboxes SET idle_timeout_s = ?, idle_action = ?, expires_at = ?, updated_at = ?
		WHERE id = ?`, int64(t.IdleTimeout/time.Second), t.IdleAction, t.ExpiresAt.UnixNano(), t.At.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("set timers of sandbox %s: %w", id, err)
	}
	return expectOne(res, id)
}

func (d *DB) Reshape(ctx context.Context, id string, s store.Shape) error {
	args, err := sqlrows.ShapeArgs(s)
	if err != nil {
		return err
	}
	res, err := d.db.ExecContext(ctx, `UPDATE sandboxes SET env = ?, metadata = ?, cpus = ?, memory_mb = ?, pids = ?, disk_mb = ?, volumes = ?, updated_at = ?
		WHERE id = ?`, append(args, id)...)
	if err != nil {
		return fmt.Errorf("reshape sandbox %s: %w", id, err)
	}
	return expectOne(res, id)
}

func (d *DB) SetNetwork(ctx context.Context, id string, p netpolicy.Policy, at time.Time) error {
	network, err := sqlrows.EncodeNetwork(p)
	if err != nil {
		return err
	}
	res, err := d.db.ExecContext(ctx, `UPDATE sandboxes SET network = ?, updated_at = ? WHERE id = ?`, network, at.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("set network policy of sandbox %s: %w", id, err)
	}
	return expectOne(res, id)
}

func (d *DB) DeleteSandbox(ctx context.Context, id string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return expectOne(res, id)
}

func expectOne(res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	return nil
}

// query runs q and scans its every row with scan.
func query[T any](ctx context.Context, d *DB, scan func(sqlrows.Scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.Collect(rows, scan)
}

// PutProcess inserts or replaces a sandbox's background process, keeping
// the later of its links' revocations (multi-argument max is NULL when
// either is).
func (d *DB) PutProcess(ctx context.Context, p *store.Process) error {
	args, err := sqlrows.ProcessArgs(p)
	if err != nil {
		return err
	}
	// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
	_, err = d.db.ExecContext(ctx, `INSERT INTO processes (`+sqlrows.ProcessColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (sandbox_id, name) DO UPDATE SET
			argv = excluded.argv, cwd = excluded.cwd, "user" = excluded."user", env = excluded.env,
			port = excluded.port, running = excluded.running, created_at = excluded.created_at,
			for_user = excluded.for_user, stdin = excluded.stdin, public = excluded.public, slot = excluded.slot,
			links_revoked_at = coalesce(max(processes.links_revoked_at, excluded.links_revoked_at),
				processes.links_revoked_at, excluded.links_revoked_at)`, args...)
	if err != nil {
		if strings.Contains(err.Error(), "FOREIGN KEY constraint failed") {
			return errdefs.NotFound("sandbox %s not found", p.SandboxID)
		}
		return fmt.Errorf("put process %s of sandbox %s: %w", p.Name, p.SandboxID, err)
	}
	return nil
}

// ListProcesses returns a sandbox's background processes, oldest first.
func (d *DB) ListProcesses(ctx context.Context, sandboxID string) ([]*store.Process, error) {
	out, err := query(ctx, d, sqlrows.ScanProcess, `SELECT `+sqlrows.ProcessColumns+`
		FROM processes WHERE sandbox_id = ? ORDER BY created_at, name`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list processes of sandbox %s: %w", sandboxID, err)
	}
	return out, nil
}

// DeleteProcess removes a sandbox's background process.
func (d *DB) DeleteProcess(ctx context.Context, sandboxID, name string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM processes WHERE sandbox_id = ? AND name = ?`, sandboxID, name)
	if err != nil {
		return fmt.Errorf("delete process %s of sandbox %s: %w", name, sandboxID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errdefs.NotFound("sandbox %s has no process %q", sandboxID, name)
	}
	return nil
}

// SetLinksRevoked sets when a process's preview links were revoked,
// unless that is later already.
func (d *DB) SetLinksRevoked(ctx context.Context, sandboxID, name string, at time.Time) error {
	res, err := d.db.ExecContext(ctx, `UPDATE processes SET links_revoked_at = coalesce(max(links_revoked_at, ?), ?)
		WHERE sandbox_id = ? AND name = ?`, at.UnixNano(), at.UnixNano(), sandboxID, name)
	if err != nil {
		return fmt.Errorf("revoke links of process %s of sandbox %s: %w", name, sandboxID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errdefs.NotFound("sandbox %s has no process %q", sandboxID, name)
	}
	return nil
}

// CreateVolume records a volume.
func (d *DB) CreateVolume(ctx context.Context, v *store.Volume) error {
	_, err := d.db.ExecContext(ctx, `INSERT INTO volumes (name, created_at) VALUES (?, ?)`, v.Name, v.CreatedAt.UnixNano())
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return errdefs.AlreadyExists("volume %s exists already", v.Name)
		}
		return fmt.Errorf("insert volume %s: %w", v.Name, err)
	}
	return nil
}

// ListVolumes returns every volume, by name.
func (d *DB) ListVolumes(ctx context.Context) ([]*store.Volume, error) {
	out, err := query(ctx, d, sqlrows.ScanVolume, `SELECT `+sqlrows.VolumeColumns+` FROM volumes ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// DeleteVolume removes a volume's record.
func (d *DB) DeleteVolume(ctx context.Context, name string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM volumes WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errdefs.NotFound("volume %s not found", name)
	}
	return nil
}

// CreateAPIKey records a key.
func (d *DB) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	// #nosec G202 -- the columns are sqlrows' constants; values go as placeholders
	_, err := d.db.ExecContext(ctx, `INSERT INTO api_keys (`+sqlrows.APIKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		sqlrows.APIKeyArgs(k)...)
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return errdefs.AlreadyExists("API key %s exists already", k.Name)
		}
		return fmt.Errorf("insert API key %s: %w", k.Name, err)
	}
	return nil
}

// ListAPIKeys returns every key, by name.
func (d *DB) ListAPIKeys(ctx context.Context) ([]*store.APIKey, error) {
	return d.queryAPIKeys(ctx, `SELECT `+sqlrows.APIKeyColumns+` FROM api_keys ORDER BY name`)
}

// APIKeyByHash finds a key by its hash.
func (d *DB) APIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	keys, err := d.queryAPIKeys(ctx, `SELECT `+sqlrows.APIKeyColumns+` FROM api_keys WHERE hash = ?`, hash)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errdefs.NotFound("no such API key")
	}
	return keys[0], nil
}

func (d *DB) queryAPIKeys(ctx context.Context, q string, args ...any) ([]*store.APIKey, error) {
	out, err := query(ctx, d, sqlrows.ScanAPIKey, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey removes a key.
func (d *DB) DeleteAPIKey(ctx context.Context, name string) error {
	res, err := d.db.ExecContext(ctx, `DELETE FROM api_keys WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete API key %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return errdefs.NotFound("API key %s not found", name)
	}
	return nil
}

// ownerOnly makes the database file, if it is not there, and its journal
// files readable by their owner alone. SQLite gives the journal files it
// makes the database file's permissions.
func ownerOnly(path string) error {
	// #nosec G304 -- the daemon's own database path
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("database %s: %w", path, err)
		}
	}
	return nil
}
