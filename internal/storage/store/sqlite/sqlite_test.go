package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store/storetest"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
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
			_, err := s.(*DB).db.ExecContext(ctx, stmt)
			return err
		},
	})
}

func TestListAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"b", "a", "c"} {
		sb := storetest.Sample(id)
		sb.CreatedAt = sb.CreatedAt.Add(time.Duration(i) * time.Second)
		if err := db.CreateSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteSandbox(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening migrates nothing and keeps the data.
	db, err = Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	list, err := db.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "b" || list[1].ID != "c" {
		t.Fatalf("list = %v, want b, c in creation order", list)
	}
}

// The database and its journal files are its owner's alone, also when an
// older version made them readable by all.
func TestDatabaseIsOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := db.CreateSandbox(t.Context(), storetest.Sample("abc")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}
