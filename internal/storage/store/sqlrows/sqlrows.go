// Package sqlrows is how the SQL stores (store/sqlite and store/postgres)
// lay out the store's records in rows: the columns, the arguments a record
// is written with, and the scanning of a row back into a record. Both
// stores keep their records alike (times as unix nanoseconds, JSON in text
// columns), so that this is written once; each keeps its own SQL text,
// transactions and error mapping.
//
// The column lists quote "user", which PostgreSQL reserves; SQLite reads a
// quoted name as the column's.
package sqlrows

import (
	"time"
)

// Scanner is one row, as *sql.Row, *sql.Rows, pgx.Row and pgx.Rows all are.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows are a query's rows, as *sql.Rows and pgx.Rows both are. Closing
// them stays with the caller, whose driver says how (database/sql's Close
// returns an error, pgx's does not): a caller defers it right after the
// query, so that rows left unread when a scan fails are released too.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Collect scans every row of rows with scan, in order; nil when there are
// none.
func Collect[T any](rows Rows, scan func(Scanner) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Time is a time as stored, unix nanoseconds, read back in UTC.
func Time(nanos int64) time.Time {
	return time.Unix(0, nanos).UTC()
}
