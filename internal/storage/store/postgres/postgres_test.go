package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/storage/store/migrations"
	"github.com/hutchdev/hutch/internal/storage/store/pgtest"
	"github.com/hutchdev/hutch/internal/storage/store/storetest"
)

// One server for the package's tests, a database each.
func TestMain(m *testing.M) { pgtest.Main(m) }

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// The Store's contract: the conformance suite every implementation runs.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) storetest.Store { return openTest(t) },
		Exec: func(ctx context.Context, s storetest.Store, stmt string) error {
			_, err := s.(*DB).pool.Exec(ctx, stmt)
			return err
		},
	})
}

// Daemons starting together on one new database migrate it once between
// them; opening it again migrates nothing.
func TestOpenConcurrently(t *testing.T) {
	url := pgtest.Start(t)
	const n = 4
	dbs := make(chan *DB, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			db, err := Open(t.Context(), url)
			dbs <- db
			errs <- err
		}()
	}
	for range n {
		if db := <-dbs; db != nil {
			t.Cleanup(func() { _ = db.Close() })
		}
		if err := <-errs; err != nil {
			t.Errorf("Open: %v", err)
		}
	}
	db := openTest(t)
	all, err := migrations.For(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	var count, latest int
	if err := db.pool.QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&count, &latest); err != nil {
		t.Fatal(err)
	}
	if count != len(all) || latest != len(all) {
		t.Errorf("schema_migrations has %d versions up to %d, want %d", count, latest, len(all))
	}
	if w, err := db.ListWorkspaces(t.Context()); err != nil || len(w) != 1 {
		t.Errorf("workspaces after several migrations: %+v, %v; want default alone", w, err)
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct{ name, url string }{
		{"not a URL", "postgres://[::1"},
		{"no server", "postgres://u:secret@/nowhere?host=/nonexistent&connect_timeout=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(t.Context(), tt.url)
			if err == nil {
				_ = db.Close()
				t.Fatal("opened")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name, url string
		want      string // "" for no error
	}{
		{"a URL", "postgres://hutch:secret@db.example.com:5432/hutch?sslmode=verify-full", ""},
		{"postgresql://", "postgresql://db.example.com/hutch", ""},
		{"over a unix socket", "postgres:///hutch?host=/run/postgresql", ""},
		{"another database", "mysql://hutch:secret@db/hutch", "mysql://hutch:xxxxx@db/hutch is not a postgres:// URL"},
		{"a path", "/var/lib/hutch/hutch.db", "is not a postgres:// URL"},
		{"not a URL", "postgres://hutch:secret@[::1", "not a URL"},
		{"a bad port", "postgres://hutch:secret@db.example.com:port/hutch", "port"},
		{"a bad sslmode", "postgres://hutch:secret@db/hutch?sslmode=always", "sslmode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckURL(tt.url)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("CheckURL: %v, want %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
