// Package postgres is the Store on PostgreSQL, for several daemons sharing
// their state, with its schema in store/migrations.
//
// It uses pgx (github.com/jackc/pgx/v5), the standard, well-kept Go driver
// for PostgreSQL, through its own pool (pgxpool) rather than database/sql:
// errors come typed (*pgconn.PgError, with the code and constraint an
// errdefs kind is chosen by), slices bind as arrays, and database/sql
// would buy nothing here, as the SQL differs from SQLite's anyway.
//
// The records are stored as SQLite stores them (times as unix nanoseconds,
// JSON in text columns, laid out for both in store/sqlrows), so that both
// give back exactly what was put: a timestamptz would keep microseconds
// only, and ResealAll matches a secret's UpdatedAt to the nanosecond.
//
// Where SQLite relied on its single writer, this store relies on single
// statements (a change of state is one UPDATE, which PostgreSQL re-checks
// against the row it waited for) or on transactions with locks (see
// ResealAll and migrate).
package postgres

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/migrations"
	"github.com/hutchdev/hutch/internal/storage/store/sqlrows"
)

var _ store.Store = (*DB)(nil)

// DB is a store.Store on one PostgreSQL database.
type DB struct {
	pool *pgxpool.Pool
}

// Open connects to the database at url (postgres://…; libpq's key=value
// form and PG* environment variables work too, as pgx reads them) and
// migrates it.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate database %s on %s: %w", cfg.ConnConfig.Database, cfg.ConnConfig.Host, err)
	}
	return &DB{pool: pool}, nil
}

// CheckURL says what is wrong with url as a database's URL, without
// connecting; nil if nothing. What it says never holds the password.
func CheckURL(url string) error {
	u, err := neturl.Parse(url)
	if err != nil {
		// Its reason only: url.Parse's error quotes the URL whole.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("%s is not a postgres:// URL", u.Redacted())
	}
	if _, err := pgxpool.ParseConfig(url); err != nil {
		// pgx's error names the URL with its password masked.
		return err
	}
	return nil
}

// migrationLock is the advisory lock migrations are applied under: daemons
// starting together on one database migrate it one after the other.
const migrationLock = 0x68757463 // "hutc"

// migrate applies every migration newer than the database's, all in one
// transaction (PostgreSQL's DDL is transactional): a failure leaves the
// schema as it was. The versions applied are recorded in schema_migrations.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT        NOT NULL,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		return migrations.Run(ctx, migrations.Postgres, target{tx})
	})
}

// target is a database being migrated, in a transaction.
type target struct{ tx pgx.Tx }

func (t target) Version(ctx context.Context) (int, error) {
	var v int
	err := t.tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func (t target) Apply(ctx context.Context, m migrations.Migration) error {
	// Without arguments, pgx sends the file as one simple query: several
	// statements, and dollar-quoted bodies, go as they are.
	if _, err := t.tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
	return err
}

// Close closes the pool, waiting for connections in use to come back.
func (d *DB) Close() error {
	d.pool.Close()
	return nil
}

// PostgreSQL's error codes (SQLSTATE) that have an errdefs kind.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// violated is the constraint err broke with code; "" if it is not such an
// error.
func violated(err error, code string) (constraint string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == code {
		return pe.ConstraintName, true
	}
	return "", false
}

func (d *DB) CreateSandbox(ctx context.Context, sb *store.Sandbox) error {
	args, err := sqlrows.SandboxArgs(sb)
	if err != nil {
		return err
	}
	_, err = d.pool.Exec(ctx, `INSERT INTO sandboxes (`+sqlrows.SandboxColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)`, args...)
	if constraint, ok := violated(err, uniqueViolation); ok {
		if constraint == "sandboxes_key" {
			return errdefs.AlreadyExists("a sandbox with key %q exists already", sb.Key)
		}
		return errdefs.AlreadyExists("sandbox %s already exists", sb.ID)
	}
	if err != nil {
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	return nil
}

func (d *DB) GetSandbox(ctx context.Context, id string) (*store.Sandbox, error) {
	sb, err := sqlrows.ScanSandbox(d.pool.QueryRow(ctx, `SELECT `+sqlrows.SandboxColumns+` FROM sandboxes WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	sb, err := sqlrows.ScanSandbox(d.pool.QueryRow(ctx, `SELECT `+sqlrows.SandboxColumns+` FROM sandboxes WHERE workspace = $1 AND key = $2`, ws, key))
	if errors.Is(err, pgx.ErrNoRows) {
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
// statement: of two changes racing, the second waits for the first's row
// and, under READ COMMITTED, re-checks its WHERE against it, so that both
// cannot apply.
func (d *DB) ChangeState(ctx context.Context, c store.StateChange) error {
	if len(c.From) == 0 {
		return fmt.Errorf("change state of sandbox %s: no state to change from", c.ID)
	}
	from := make([]string, len(c.From))
	for i, f := range c.From {
		from[i] = string(f)
	}
	var handle []byte // NULL: unchanged
	if c.Handle != nil {
		handle = c.Handle
	}
	tag, err := d.pool.Exec(ctx, `UPDATE sandboxes SET state = $1, state_reason = $2, updated_at = $3,
		handle = coalesce($4, handle), key = CASE WHEN $5 THEN NULL ELSE key END
		WHERE id = $6 AND state = ANY($7)`,
		string(c.To), c.Reason, c.At.UnixNano(), handle, c.To == store.Deleting, c.ID, from)
	if err != nil {
		return fmt.Errorf("change state of sandbox %s: %w", c.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var state string
	err = d.pool.QueryRow(ctx, `SELECT state FROM sandboxes WHERE id = $1`, c.ID).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return errdefs.NotFound("sandbox %s not found", c.ID)
	}
	if err != nil {
		return fmt.Errorf("change state of sandbox %s: %w", c.ID, err)
	}
	return errdefs.Conflict("sandbox %s is %s, not %s", c.ID, state, strings.Join(from, " or "))
}

// SetTimers sets a sandbox's timers and nothing else.
func (d *DB) SetTimers(ctx context.Context, id string, t store.Timers) error {
	tag, err := d.pool.Exec(ctx, `UPDATE sandboxes SET idle_timeout_s = $1, idle_action = $2, expires_at = $3, updated_at = $4
		WHERE id = $5`, int64(t.IdleTimeout/time.Second), t.IdleAction, t.ExpiresAt.UnixNano(), t.At.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("set timers of sandbox %s: %w", id, err)
	}
	return expectOne(tag, "sandbox %s not found", id)
}

func (d *DB) Reshape(ctx context.Context, id string, s store.Shape) error {
	args, err := sqlrows.ShapeArgs(s)
	if err != nil {
		return err
	}
	tag, err := d.pool.Exec(ctx, `UPDATE sandboxes SET env = $1, metadata = $2, cpus = $3, memory_mb = $4, pids = $5, disk_mb = $6, volumes = $7, updated_at = $8
		WHERE id = $9`, append(args, id)...)
	if err != nil {
		return fmt.Errorf("reshape sandbox %s: %w", id, err)
	}
	return expectOne(tag, "sandbox %s not found", id)
}

func (d *DB) SetNetwork(ctx context.Context, id string, p netpolicy.Policy, at time.Time) error {
	network, err := sqlrows.EncodeNetwork(p)
	if err != nil {
		return err
	}
	tag, err := d.pool.Exec(ctx, `UPDATE sandboxes SET network = $1, updated_at = $2 WHERE id = $3`, network, at.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("set network policy of sandbox %s: %w", id, err)
	}
	return expectOne(tag, "sandbox %s not found", id)
}

func (d *DB) DeleteSandbox(ctx context.Context, id string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM sandboxes WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return expectOne(tag, "sandbox %s not found", id)
}

// expectOne is ErrNotFound, saying format, unless tag counts a row.
func expectOne(tag pgconn.CommandTag, format string, args ...any) error {
	if tag.RowsAffected() == 0 {
		return errdefs.NotFound(format, args...)
	}
	return nil
}

// query runs q and scans its every row with scan.
func query[T any](ctx context.Context, d *DB, scan func(sqlrows.Scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := d.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close() // pgx closes rows read to the end; not those a scan failed in
	return sqlrows.Collect(rows, scan)
}
