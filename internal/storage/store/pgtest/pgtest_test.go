package pgtest

import (
	"errors"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A server started for one test takes connections, gives it an empty
// database, and is gone with its files once the test ends.
func TestStart(t *testing.T) {
	var dsn string
	t.Run("alone", func(t *testing.T) {
		began := time.Now()
		dsn = Start(t)
		t.Logf("a server started, with a database, in %v", time.Since(began).Round(time.Millisecond))
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		var tables int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil || tables != 0 {
			t.Fatalf("a new database has %d tables (%v), want 0", tables, err)
		}
	})
	if dsn == "" {
		t.Skip("no server was started")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(u.Query().Get("host")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server's directory is still there after its test: %v", err)
	}
	if conn, err := pgx.Connect(t.Context(), dsn); err == nil {
		conn.Close(t.Context())
		t.Error("the server still takes connections after its test")
	}
}
