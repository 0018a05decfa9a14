package core

import (
	"cmp"
	"context"
	"errors"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Create makes a sandbox, with scopes: without a Key it creates; with one it is
// get-or-create. The sandbox that has the key is returned, woken first if
// suspended or paused, started again on its files if it failed (state
// error), replaced if that fails too; only when
// none has the key is one created. created says which. A key's sandbox
// asked for with another template or runtime is a conflict, not a
// surprise.
//
// This is how a sandbox per conversation ("chat-42"), per agent
// ("agent-7") or shared by a team ("team-data") is kept.
func (m *Manager) Create(ctx context.Context, opts create.Options) (sb *store.Sandbox, created bool, err error) {
	if opts.Key == "" {
		sb, err := m.create(ctx, opts)
		return sb, err == nil, err
	}
	ws := opts.Workspace
	if ws == "" {
		ws = workspace.Default
	}
	unlock, err := m.locks.Lock(ctx, "key:"+ws+"/"+opts.Key) // one get-or-create per key at a time
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	rec, err := m.store.GetSandboxByKey(ctx, ws, opts.Key)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		sb, err := m.create(ctx, opts)
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			return sb, err == nil, err
		}
		// Another node made the key's sandbox meanwhile (the lock above
		// is this daemon's only; the store's unique key decides between
		// nodes): that one is the key's.
		if rec, err = m.store.GetSandboxByKey(ctx, ws, opts.Key); err != nil {
			return nil, false, err
		}
	case err != nil:
		return nil, false, err
	}
	if err := m.checkHeld(rec); err != nil {
		return nil, false, err
	}
	if opts.Template != "" && opts.Template != rec.Template || opts.Runtime != "" && opts.Runtime != rec.Backend {
		return nil, false, errdefs.Conflict("key %q names sandbox %s, of template %s on %s; this asks for %s on %s",
			opts.Key, rec.ID, rec.Template, rec.Backend, cmp.Or(opts.Template, rec.Template), cmp.Or(opts.Runtime, rec.Backend))
	}
	sb, err = m.Resume(ctx, rec.ID) // wakes or starts it, a failed one too
	if err == nil || rec.State != store.Error {
		return sb, false, err
	}
	m.log.Info("replacing failed sandbox of key: it did not start again", attrSandbox, rec.ID, "reason", rec.StateReason, "error", err)
	if err := m.Delete(ctx, rec.ID); err != nil {
		return nil, false, err
	}
	sb, err = m.create(ctx, opts)
	return sb, err == nil, err
}
