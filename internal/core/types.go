package core

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Sandbox is a sandbox as the core tells its callers (the API, MCP): the
// stored record without what is the core's alone (the backend's handle)
// and without its environment, which may hold secrets and is never
// returned.
type Sandbox struct {
	ID string
	// Workspace owns it; User is the product's user it was made for.
	Workspace string
	User      string
	Template  string
	// TemplateVersion is the version of Template it was made from.
	TemplateVersion string
	Runtime         string
	State           store.State
	StateReason     string

	CPUs        float64
	MemoryMB    int64
	Pids        int64
	DiskMB      int64
	IdleTimeout time.Duration
	IdleAction  string
	Key         string
	ExpiresAt   time.Time
	Volumes     []store.VolumeMount
	Metadata    map[string]string
	Network     netpolicy.Policy
	// Secrets, when not nil, are the names of its workspace's secrets its
	// commands get.
	Secrets []string
	// Node is the node daemon that holds it ("" on a single box).
	Node string

	CreatedAt time.Time
	UpdatedAt time.Time
}

// view is what callers see of a stored sandbox: a copy.
func view(rec *store.Sandbox) *Sandbox {
	sb := &Sandbox{
		ID: rec.ID, Workspace: rec.Workspace, User: rec.User, Secrets: slices.Clone(rec.Secrets), Template: rec.Template, TemplateVersion: rec.TemplateVersion, Runtime: rec.Backend,
		State: rec.State, StateReason: rec.StateReason, CPUs: rec.CPUs, MemoryMB: rec.MemoryMB, Pids: rec.Pids,
		DiskMB: rec.DiskMB, IdleTimeout: rec.IdleTimeout, IdleAction: rec.IdleAction, Key: rec.Key,
		ExpiresAt: rec.ExpiresAt, Metadata: maps.Clone(rec.Metadata), CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		Network: rec.Network, Node: rec.Node, Volumes: slices.Clone(rec.Volumes),
	}
	return sb
}

// views is view of each.
func views(recs []*store.Sandbox) []*Sandbox {
	out := make([]*Sandbox, 0, len(recs))
	for _, r := range recs {
		out = append(out, view(r))
	}
	return out
}

// get returns a sandbox as callers see it.
func (m *Manager) get(ctx context.Context, id string) (*Sandbox, error) {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State == store.Deleting {
		return nil, deletedError(id) // gone to everyone, though still torn down
	}
	return view(rec), nil
}
