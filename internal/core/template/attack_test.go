package template

import (
	"context"
	"errors"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// Attacks on the boundaries of issue 36 that pass through snapshots and
// forks (docs/security.md).

// Finding 9: a fork got the daemon's default network policy, not its
// source's, so a key limited to mode none forked its way to full. A fork
// keeps its source's policy, and the caller's key's ceiling holds.
func TestAttackForkNetworkCeiling(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	quiet := c.Create(t, create.Options{Workspace: "acme", Network: &netpolicy.Policy{Mode: netpolicy.None}})
	forks, err := s.Fork(ctx, quiet.ID, 1, netpolicy.None)
	if err != nil {
		t.Fatalf("Fork within the ceiling: %v", err)
	}
	deleteLater(t, c, forks[0].Sandbox.ID)
	if got := forks[0].Sandbox.Network.Mode; got != netpolicy.None {
		t.Errorf("the fork of a sandbox of mode none has mode %q", got)
	}
	open := c.Create(t, create.Options{Workspace: "acme", Network: &netpolicy.Policy{Mode: netpolicy.Full}})
	if forks, err := s.Fork(ctx, open.ID, 1, netpolicy.None); !errors.Is(err, errdefs.ErrPermissionDenied) {
		for _, r := range forks {
			f := r.Sandbox
			deleteLater(t, c, f.ID)
		}
		t.Errorf("a key of mode none forking a sandbox of mode full: %v, %v; want permission denied", forks, err)
	}
	// The core refuses above the ceiling on every create path, not only
	// forks.
	if sb, _, err := c.M.Create(ctx, create.Options{Workspace: "acme", Network: &netpolicy.Policy{Mode: netpolicy.Full}, NetworkCeiling: netpolicy.Allowlist}); !errors.Is(err, errdefs.ErrPermissionDenied) {
		if sb != nil {
			deleteLater(t, c, sb.ID)
		}
		t.Errorf("a create above its ceiling: %v, want permission denied", err)
	}
	sb, _, err := c.M.Create(ctx, create.Options{Workspace: "acme", NetworkCeiling: netpolicy.None})
	if err != nil {
		t.Fatal(err)
	}
	deleteLater(t, c, sb.ID)
	if sb.Network.Mode != netpolicy.None {
		t.Errorf("a create with no policy under ceiling none got mode %q", sb.Network.Mode)
	}
}

// Finding 5: a snapshot made with the administrator's key was shared with
// every workspace, with the files (and under gVisor the memory) of the
// sandbox of the workspace it came from. A snapshot is its sandbox's
// workspace's, whoever asks.
func TestAttackSnapshotStaysInItsWorkspace(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{Workspace: "acme"})
	for _, name := range []string{"shared", "stolen~other", "default~default"} {
		if info, err := s.Snapshot(ctx, sb.ID, name); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Snapshot of acme's sandbox as %q: %+v, %v; want invalid argument", name, info, err)
		}
	}
	if info, err := s.Snapshot(ctx, sb.ID, "mine~acme"); err != nil || info.Name != "mine~acme" {
		t.Errorf("Snapshot in its own workspace: %+v, %v", info, err)
	}
}

// deleteLater deletes sandbox id when t ends.
func deleteLater(t *testing.T, c *coretest.Core, id string) {
	t.Cleanup(func() {
		if err := c.M.Delete(context.WithoutCancel(t.Context()), id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("delete sandbox %s: %v", id, err)
		}
	})
}
