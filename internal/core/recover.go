package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// recoverSandboxes picks up the sandboxes an earlier daemon process left (New calls
// it, before anything is served): live ones are reconnected to; ones whose
// container died are marked error and cleaned; ones caught half-made are
// removed; containers no record knows are destroyed.
func (m *Manager) recoverSandboxes(ctx context.Context) error {
	ctx = hook.WithCause(ctx, hook.Cause{Code: hook.CauseRecovery})
	recs, err := m.held(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, rec := range recs {
		known[rec.ID] = true
		if err := m.recoverOne(ctx, rec); err != nil {
			m.log.Error("recover sandbox", attrSandbox, rec.ID, "error", err)
		}
	}
	for _, name := range m.runtimes.Names() {
		be := m.runtimes.Get(name)
		if m.runtimes.SettingUp(name) {
			// Its binary is being built: nothing of it can be listed, nor
			// can any have run without it.
			continue
		}
		ids, err := be.List(ctx)
		if err != nil {
			m.log.Error("list backend sandboxes", attrBackend, name, "error", err)
			continue
		}
		for _, id := range ids {
			if known[id] {
				continue
			}
			m.log.Warn("destroying sandbox no record knows", attrSandbox, id, attrBackend, name)
			if err := be.Destroy(ctx, backend.Handle{ID: id, Backend: name}); err != nil {
				m.log.Error("destroy unknown sandbox", attrSandbox, id, "error", err)
			}
		}
	}
	// Template versions replaced while their last sandbox still ran.
	if err := m.pruneTemplates(ctx); err != nil {
		m.log.Warn("prune old template versions", "error", err)
	}
	return nil
}

func (m *Manager) recoverOne(ctx context.Context, rec *store.Sandbox) error {
	be := m.runtimes.Get(rec.Backend)
	if be == nil {
		if rec.State != store.Error && !store.Transient(rec.State) {
			m.mustTransition(ctx, rec.ID, store.Error, fmt.Sprintf("backend %q is not configured", rec.Backend), rec.State)
		}
		return nil
	}
	h := backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	switch rec.State {
	case store.Creating:
		// Caught half-made: nobody got its ID, so it goes.
		if err := be.Destroy(ctx, h); err != nil {
			return err
		}
		return m.store.DeleteSandbox(ctx, rec.ID)
	case store.Deleting:
		// Caught half-deleted: the delete was acknowledged, so it goes.
		if err := be.Destroy(ctx, h); err != nil {
			m.mustTransition(ctx, rec.ID, store.Error, "delete failed after a restart: "+err.Error(), store.Deleting)
			return err
		}
		return m.store.DeleteSandbox(ctx, rec.ID)
	case store.Suspending:
		// Caught half-way: finish, then it is suspended as asked.
		return m.haltAfterRestart(ctx, be, h, rec, true, rec.StateReason, "its suspend")
	case store.Stopping:
		return m.haltAfterRestart(ctx, be, h, rec, false, rec.StateReason, "its stop")
	case store.Resuming:
		// Caught half-way back: undo what was started, so that it is
		// wholly suspended; the next call resumes it.
		return m.haltAfterRestart(ctx, be, h, rec, true,
			"its resume was cut short by a daemon restart; the next call resumes it", "undoing its interrupted resume")
	case store.Error:
		// Its container may have been left by a daemon that died before
		// cleaning up; its files stay.
		m.keepFiles(ctx, be, h)
		return nil
	case store.Paused:
		// Frozen, its agent answers nothing: found is enough.
		inst := newInstance(rec, be, h, m.clock)
		if err := be.Recover(ctx, h); err != nil {
			m.markLost(ctx, inst, "its container stopped while the daemon was down")
			return nil
		}
		inst.paused = true
		m.recoverHooks(ctx, inst, rec)
		m.setLive(inst)
		m.log.Info("sandbox recovered, paused", attrSandbox, rec.ID)
		return nil
	case store.Running:
		inst := newInstance(rec, be, h, m.clock)
		err := be.Recover(ctx, h)
		if err == nil {
			// OOM kills from before the restart are no command's.
			inst.limitHits, _ = be.LimitHits(ctx, h)
			if err = inst.agent.Health(ctx); err == nil {
				m.recoverHooks(ctx, inst, rec)
				m.setLive(inst)
				m.log.Info("sandbox recovered", attrSandbox, rec.ID)
				return nil
			}
		}
		reason := "its container stopped while the daemon was down"
		if !errors.Is(err, errdefs.ErrNotFound) {
			reason = "its agent did not answer after a daemon restart"
		}
		m.markLost(ctx, inst, reason)
		return nil
	}
	return nil
}

// recoverHooks starts the hooks of a sandbox found running after a
// restart (its network served by its stored policy). What fails to start
// is said in the log, not fatal: without its network, say, the sandbox's
// connections are refused.
func (m *Manager) recoverHooks(ctx context.Context, inst *instance, rec *store.Sandbox) {
	if err := m.startHooks(ctx, inst, rec.Network); err != nil {
		m.log.Error("hooks of a recovered sandbox not started: without its network its connections are refused", attrSandbox, rec.ID, "error", err)
	}
}

// haltAfterRestart suspends (keepMemory) or stops a sandbox a daemon
// restart caught on its way between states, and records it so, with
// reason; what names the step for the error.
func (m *Manager) haltAfterRestart(ctx context.Context, be backend.Backend, h backend.Handle, rec *store.Sandbox, keepMemory bool, reason, what string) error {
	was := rec.State
	suspender := be.Capabilities().Suspend
	if suspender == nil {
		return fmt.Errorf("sandbox %s is %s, under a runtime that cannot suspend or stop", rec.ID, rec.State)
	}
	if err := suspender.Suspend(ctx, h, keepMemory); err != nil {
		m.mustTransition(ctx, rec.ID, store.Error, what+" after a restart failed: "+err.Error(), was)
		return err
	}
	state := store.Suspended
	if !keepMemory {
		state = store.Stopped
	}
	m.log.Info("sandbox "+string(state)+" after a restart", attrSandbox, rec.ID, "was", rec.State)
	m.mustTransition(ctx, rec.ID, state, reason, was)
	return nil
}

// Run enforces idle timeouts and keeps the warm pools full until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.reapEvery)
	defer t.Stop()
	m.fillPools(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.tick(ctx)
		case <-m.pool.kick:
			m.fillPools(ctx)
		}
	}
}

// tick is one round of the timers, at the clock's time: CPU samples, idle
// timeouts and, each second at most, max lifetimes; then the hooks'
// ticks, and the pools are filled. The suspends and deletes it decides run in the background (see
// inBackground).
func (m *Manager) tick(ctx context.Context) {
	now := m.clock.Now()
	m.sampleCPU(ctx, now)
	m.reapIdle(ctx, now)
	if now.Sub(m.lastExpiry) >= max(m.reapEvery, time.Second) {
		m.lastExpiry = now
		m.deleteExpired(ctx, now)
	}
	m.hooks.Tick(ctx, now)
	m.fillPools(ctx)
}

// reapIdle suspends (or deletes, as each asked) sandboxes that had no call,
// no running command, no running background process and no CPU use (see
// sampleCPU) for their idle timeout.
func (m *Manager) reapIdle(ctx context.Context, now time.Time) {
	m.mu.Lock()
	var idle []string
	for id, inst := range m.live {
		if inst.idle(now) {
			idle = append(idle, id)
		}
	}
	m.mu.Unlock()
	for _, id := range idle {
		m.inBackground(id, func() { m.reap(ctx, id) })
	}
}

// inBackground runs fn, a suspend or delete of sandbox id by a timer, in a
// goroutine of its own, unless one runs for id already: a runtime's
// teardown takes seconds (gVisor's), which must not make the next sandbox
// late. Close waits for them.
func (m *Manager) inBackground(id string, fn func()) {
	m.mu.Lock()
	if m.reaping[id] {
		m.mu.Unlock()
		return
	}
	m.reaping[id] = true
	m.mu.Unlock()
	m.reaps.Add(1)
	go func() {
		defer func() {
			m.mu.Lock()
			delete(m.reaping, id)
			m.mu.Unlock()
			m.reaps.Done()
		}()
		fn()
	}()
}

// reap suspends or deletes an idle sandbox, as it asked, unless a hook
// says something keeps it busy (a background process that is not a
// service: see hook.Busier): that is activity.
func (m *Manager) reap(ctx context.Context, id string) {
	ctx = hook.WithCause(ctx, hook.Cause{Code: hook.CauseIdle})
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return // deleted meanwhile
	}
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	if inst != nil && !inst.isPaused() {
		if busy, errs := m.hooks.Busy(ctx, &Running{m: m, inst: inst}); len(busy) > 0 && len(errs) == 0 {
			inst.touch(m.clock.Now())
			return
		}
	}
	if rec.IdleAction == store.IdleSuspend || rec.IdleAction == store.IdleStop {
		why := fmt.Sprintf("idle for %s", rec.IdleTimeout)
		if _, err := m.Halt(ctx, id, Halt{Stop: rec.IdleAction != store.IdleSuspend, Reason: why}); err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrConflict) {
			m.log.Error(rec.IdleAction+" idle sandbox", attrSandbox, id, "error", err)
		}
		return
	}
	m.log.Info("deleting idle sandbox", attrSandbox, id)
	if err := m.deleteAndWait(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Error("delete idle sandbox", attrSandbox, id, "error", err)
	}
}

// deleteExpired deletes the sandboxes whose max lifetime has ended,
// running or suspended, in the background as reaps are.
func (m *Manager) deleteExpired(ctx context.Context, now time.Time) {
	recs, err := m.held(ctx)
	if err != nil {
		m.log.Error("list sandboxes for expiry", "error", err)
		return
	}
	for _, rec := range recs {
		if rec.ExpiresAt.IsZero() || now.Before(rec.ExpiresAt) || rec.State == store.Deleting {
			continue
		}
		m.inBackground(rec.ID, func() {
			m.log.Info("deleting sandbox at the end of its max lifetime", attrSandbox, rec.ID, "expired_at", rec.ExpiresAt)
			ctx := hook.WithCause(ctx, hook.Cause{Code: hook.CauseLifetime})
			if err := m.deleteAndWait(ctx, rec.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				m.log.Error("delete expired sandbox", attrSandbox, rec.ID, "error", err)
			}
		})
	}
}

// Close finishes the teardowns of deleted sandboxes, destroys the warm
// pools' sandboxes and drops agent connections.
// Users' sandboxes keep running: the next daemon recovers them.
func (m *Manager) Close() {
	m.mu.Lock()
	live := slices.Collect(maps.Values(m.live))
	m.mu.Unlock()
	for _, inst := range live {
		inst.unwatch() // the next daemon watches them
	}
	m.reaps.Wait()
	m.teardowns.Wait() // or the next daemon would finish them
	m.unobserve()      // a closed core hears of templates no more
	m.drainPools()
	for _, inst := range live {
		inst.agent.CloseIdleConnections()
	}
}
