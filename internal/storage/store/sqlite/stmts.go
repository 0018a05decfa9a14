package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtDB is a *sql.DB that prepares each query text once and runs the
// prepared statement from then on. SQLite parses a statement at each
// prepare, and the pure-Go SQLite parses slowly: 60 µs and more for the
// sandbox queries, most of the daemon's time in its database. The daemon
// runs the same few statements for every sandbox, so each is parsed once.
//
// The texts are the store's own constants (placeholders carry the values),
// so the cache stays as small as the code.
type stmtDB struct {
	*sql.DB
	stmts sync.Map // query text → *sql.Stmt
}

// stmt returns q's statement, preparing it on first use.
func (d *stmtDB) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := d.stmts.Load(q); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := d.DB.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, raced := d.stmts.LoadOrStore(q, s); raced {
		_ = s.Close() // a concurrent first use stored its own
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

func (d *stmtDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s, err := d.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

func (d *stmtDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := d.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (d *stmtDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	s, err := d.stmt(ctx, q)
	if err != nil {
		// A Row carries its error to Scan; running the query unprepared
		// makes one with the same error.
		return d.DB.QueryRowContext(ctx, q, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// Close closes the statements, then the database.
func (d *stmtDB) Close() error {
	var errs []error
	d.stmts.Range(func(q, s any) bool {
		errs = append(errs, s.(*sql.Stmt).Close())
		d.stmts.Delete(q)
		return true
	})
	return errors.Join(append(errs, d.DB.Close())...)
}
