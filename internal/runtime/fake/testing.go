package fake

import (
	"context"
	"os"
	"testing"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// TempDir returns a directory for a Backend, removed when the test ends.
// It is short, since the agents' sockets are in it and a socket's path has
// at most 107 bytes, and open to the sandbox user, whose homes are in it.
// A sandbox still in it at the end of a test that passed is an error; it is
// destroyed either way.
func TempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hutch-fake-")
	if err != nil {
		t.Fatal(err)
	}
	// #nosec G302 -- the sandbox user must reach its home below
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b := New(dir)
		ids, err := b.List(context.Background())
		if err != nil {
			t.Error(err)
		}
		for _, id := range ids {
			if !t.Failed() {
				t.Errorf("fake sandbox %s left behind", id)
			}
			if err := b.Destroy(context.Background(), backend.Handle{ID: id, Backend: Name}); err != nil {
				t.Error(err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}
