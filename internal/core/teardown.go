package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// A delete is two steps. The first, which the caller waits for, makes
// the sandbox gone to everyone: it is marked deleting (giving up its key),
// its calls and its network end, and its processes are killed where the
// backend can (backend.Killer). The second, the teardown, is the slow
// part (the runtime's own delete, unmounting, removing the sandbox's
// files and record: ~0.1 s under runc, ~2 s under gVisor here), run in
// the background, at most maxTeardowns at once, under the sandbox's lock,
// so that a call that comes meanwhile waits for it and then finds no
// sandbox. A crash between the steps is no loss: the next daemon finishes
// the teardown of every sandbox it finds deleting (recoverOne).

// maxTeardowns is how many teardowns run at once. Each is mostly a
// runtime's processes and the kernel's unmounts: more than a few only
// slows the creates beside them.
const maxTeardowns = 4

// maxBacklog is how many deleted sandboxes may wait for their teardown
// before a create waits for the backlog to shrink: a deleted sandbox
// holds its disk, mounts, cgroups and id range until then, and creates
// faster than teardowns would pile them up without bound.
const maxBacklog = 4 * maxTeardowns

// Delete ends a sandbox and forgets it, returning once it is gone to
// everyone and nothing runs in it; its teardown goes on in the background.
// A sandbox whose teardown fails comes back, in state error with the
// reason.
func (m *Manager) Delete(ctx context.Context, id string) error {
	_, err := m.delete(ctx, id)
	return err
}

// deleteAndWait is Delete that returns when the teardown has ended too,
// with its error.
func (m *Manager) deleteAndWait(ctx context.Context, id string) error {
	done, err := m.delete(ctx, id)
	if err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AwaitTeardown returns once sandbox id, if it is being torn down, no
// longer is: what it used (its template, its volumes) is free then. A
// teardown that failed (the sandbox is back, in state error) is its error.
func (m *Manager) AwaitTeardown(ctx context.Context, id string) error {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil || rec.State != store.Deleting {
		return nil // gone already, or not being deleted
	}
	if rec.Node != m.node {
		return m.awaitRecordGone(ctx, id) // another node tears it down
	}
	unlock, err := m.locks.Lock(ctx, id) // the teardown holds it
	if err != nil {
		return err
	}
	unlock()
	if rec, err := m.store.GetSandbox(ctx, id); err == nil && rec.State == store.Error {
		return fmt.Errorf("delete sandbox %s: %s", id, rec.StateReason)
	}
	return nil
}

// delete is Delete's first step; done receives the teardown's outcome.
func (m *Manager) delete(ctx context.Context, id string) (done <-chan error, err error) {
	began := time.Now()
	if rec, err := m.store.GetSandbox(ctx, id); err == nil && rec.State == store.Deleting {
		return nil, deletedError(id) // not to wait for its teardown
	}
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State == store.Deleting {
		return nil, deletedError(id)
	}
	// Once marked, the delete is acknowledged: it must go on even if the
	// caller goes away.
	ctx = context.WithoutCancel(ctx)
	if err := m.transition(ctx, id, store.Deleting, "deleted", rec.State); err != nil {
		return nil, err
	}
	h := backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	be := m.runtimes.Get(rec.Backend)
	if inst := m.takeLive(id); inst != nil {
		inst.close(true)
		if k := be.Capabilities().Kill; k != nil {
			if err := k.Kill(ctx, h); err != nil {
				m.log.Warn("kill deleted sandbox; its teardown ends it", attrSandbox, id, "error", err)
			}
		}
	}
	m.hooks.Deleted(id)
	out := make(chan error, 1)
	m.teardowns.Go(func() {
		err := m.teardown(ctx, be, h)
		m.observed("delete", rec, began, err)
		unlock()
		out <- err
	})
	return out, nil
}

// teardown destroys a deleted sandbox's container and files, then its
// record. The caller holds the sandbox's lock.
func (m *Manager) teardown(ctx context.Context, be backend.Backend, h backend.Handle) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	began := time.Now()
	if be != nil { // a backend no longer configured has nothing of it here to destroy
		if err := be.Destroy(ctx, h); err != nil {
			m.mustTransition(ctx, h.ID, store.Error, "delete failed: "+err.Error(), store.Deleting)
			m.log.Error("tear down deleted sandbox", attrSandbox, h.ID, "error", err)
			return fmt.Errorf("delete sandbox %s: %w", h.ID, err)
		}
	}
	if err := m.hooks.Removed(ctx, h.ID); err != nil {
		m.log.Warn("remove what a hook kept of a deleted sandbox", attrSandbox, h.ID, "error", err)
	}
	if err := m.store.DeleteSandbox(ctx, h.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Error("drop record of deleted sandbox", attrSandbox, h.ID, "error", err)
		return err
	}
	m.log.Info("sandbox deleted", attrSandbox, h.ID, "teardown", time.Since(began))
	return nil
}

// deletedError is what a call to a sandbox being torn down gets: to its
// caller it is gone already.
func deletedError(id string) error {
	return errdefs.NotFound("sandbox %s not found: it was deleted", id)
}

// teardownPoll is how often a teardown on another node is looked at.
const teardownPoll = 100 * time.Millisecond

// awaitRecordGone waits until sandbox id's record is gone: the end of a
// teardown on another node, which removes it last.
func (m *Manager) awaitRecordGone(ctx context.Context, id string) error {
	for {
		if _, err := m.store.GetSandbox(ctx, id); errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(teardownPoll):
		}
	}
}
