package sqlite

import (
	"strings"
	"testing"
)

// Each query text is prepared once and its statement reused; a query that
// does not prepare answers with SQLite's error, as unprepared.
func TestStatementsPreparedOnce(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	count := func() (n int) {
		db.db.stmts.Range(func(any, any) bool { n++; return true })
		return n
	}
	before := count()
	for range 3 {
		var one int
		if err := db.db.QueryRowContext(ctx, `SELECT 1 + ?`, 0).Scan(&one); err != nil || one != 1 {
			t.Fatalf("SELECT 1 + 0 = %d, %v", one, err)
		}
	}
	if got := count() - before; got != 1 {
		t.Errorf("%d statements prepared for one query text run three times, want 1", got)
	}
	var x int
	err := db.db.QueryRowContext(ctx, `SELECT a FROM missing`).Scan(&x)
	if err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("a query on a missing table: %v, want SQLite's no such table", err)
	}
	if _, err := db.db.ExecContext(ctx, `CREATE TABLE t (a); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Errorf("a script's statements all run: %d rows, %v; want 2", n, err)
	}
}
