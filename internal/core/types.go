package core

import (
	"context"

	"github.com/hutchdev/hutch/internal/storage/store"
)

// view is a sandbox as the core tells its callers (the API, MCP): its
// record without what is the core's alone (the backend's handle) and
// without its environment, which may hold secrets and is never returned.
func view(rec *store.Sandbox) *store.Sandbox {
	sb := *rec
	sb.Env, sb.Handle = nil, nil
	return &sb
}

// views is view of each.
func views(recs []*store.Sandbox) []*store.Sandbox {
	out := make([]*store.Sandbox, 0, len(recs))
	for _, r := range recs {
		out = append(out, view(r))
	}
	return out
}

// Get returns a sandbox as callers see it (see view).
func (m *Manager) Get(ctx context.Context, id string) (*store.Sandbox, error) {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State == store.Deleting {
		return nil, deletedError(id) // gone to everyone, though still torn down
	}
	return view(rec), nil
}
