package cluster

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// A node name a live node of another certificate holds is refused; the
// same node starting again, a name whose node went silent, and a new name
// are not.
func TestClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	now := time.Now().UTC()
	if err := db.PutNode(ctx, &store.Node{ID: "host-a", URL: "https://10.0.0.1:8443", Fingerprint: "aa", State: store.NodeUp,
		StartedAt: now, HeartbeatAt: now.Add(-3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	err = Claim(ctx, db, "host-a", "bb", 0, now)
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "--node-name") || !strings.Contains(err.Error(), "https://10.0.0.1:8443") {
		t.Errorf("a second node under a live node's name: %v; want a conflict naming that node and --node-name", err)
	}
	if err := Claim(ctx, db, "host-a", "aa", 0, now); err != nil {
		t.Errorf("the same node starting again: %v", err)
	}
	if err := Claim(ctx, db, "host-b", "bb", 0, now); err != nil {
		t.Errorf("a new name: %v", err)
	}
	if err := Claim(ctx, db, "host-a", "bb", 0, now.Add(DefaultTimeout)); err != nil {
		t.Errorf("the name of a node silent past the timeout: %v", err)
	}
}
