package core

import (
	"context"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Pause freezes a running sandbox: its processes keep their memory and get
// no CPU. Any call that needs it (exec, files) thaws it first; Resume does
// so explicitly. Pausing a paused sandbox does nothing.
func (m *Manager) Pause(ctx context.Context, id string) (*store.Sandbox, error) {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	inst := m.liveInstance(id)
	if inst == nil {
		return nil, m.notLive(ctx, id)
	}
	pauser := inst.backend.Capabilities().Pause
	if pauser == nil {
		return nil, errdefs.NotImplemented("runtime %s cannot pause sandboxes", inst.backend.Name())
	}
	if !inst.isPaused() {
		began := time.Now()
		if err := pauser.Pause(ctx, inst.handle); err != nil {
			return nil, err
		}
		inst.setPaused(true)
		if err := m.transition(ctx, id, store.Paused, "paused by request", store.Running); err != nil {
			inst.setPaused(false)
			return nil, err
		}
		m.log.Info("sandbox paused", attrSandbox, id)
		m.hooks.Observed(hook.Step{Name: "pause", Sandbox: id, Workspace: inst.owner.workspace, Runtime: inst.backend.Name(), Took: time.Since(began)})
	}
	return m.Get(ctx, id)
}

// thaw unpauses inst if it is paused, saying why. It is on the way of
// every call to a sandbox: a running one costs a look at a flag.
func (m *Manager) thaw(ctx context.Context, inst *instance, reason string) error {
	if !inst.isPaused() {
		return nil
	}
	unlock, err := m.locks.Lock(ctx, inst.id)
	if err != nil {
		return err
	}
	defer unlock()
	if !m.isLive(inst) {
		return m.notLive(ctx, inst.id) // gone meanwhile
	}
	if !inst.isPaused() {
		return nil // thawed meanwhile
	}
	pauser := inst.backend.Capabilities().Pause
	if pauser == nil {
		return errdefs.NotImplemented("runtime %s cannot pause sandboxes", inst.backend.Name())
	}
	// Even when the caller has gone: a half-thawed sandbox helps no one.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := pauser.Unpause(tctx, inst.handle); err != nil {
		return err
	}
	inst.setPaused(false)
	inst.touch(m.clock.Now())
	m.log.Info("sandbox unpaused", attrSandbox, inst.id, "reason", reason)
	return m.transition(tctx, inst.id, store.Running, reason, store.Paused)
}
