package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/store"
)

// Suspend stops a running (or paused) sandbox so that it uses no memory and
// no CPU, keeping its files, and its memory and processes where the
// runtime checkpoints (gVisor); elsewhere they are gone, and the resume
// starts again the background processes that ran. Any call that needs it
// (exec, code, files) resumes it first; Resume does so explicitly.
// Suspending a suspended sandbox does nothing.
func (m *Manager) Suspend(ctx context.Context, id, reason string) (*store.Sandbox, error) {
	return m.halt(ctx, id, reason, true)
}

// Stop ends a sandbox's processes, keeping its files only (no memory, even
// under gVisor, so no disk for it either). Unlike a suspended sandbox, a
// stopped one is not woken by calls: Resume starts it, with the background
// processes that ran. A suspended sandbox can be stopped: its kept memory
// goes.
func (m *Manager) Stop(ctx context.Context, id, reason string) (*store.Sandbox, error) {
	return m.halt(ctx, id, reason, false)
}

// halt suspends (keepMemory) or stops a sandbox.
func (m *Manager) halt(ctx context.Context, id, reason string, keepMemory bool) (*store.Sandbox, error) {
	halting, halted := store.StateSuspending, store.StateSuspended
	if !keepMemory {
		halting, halted = store.StateStopping, store.StateStopped
	}
	unlock := m.lockWake(id)
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State == halted {
		return rec, nil
	}
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	be, h := m.backends[rec.Backend], backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	switch {
	case inst != nil:
		be, h = inst.backend, inst.handle
	case !keepMemory && rec.State == store.StateSuspended && be != nil:
		// Stopped where it is: its kept memory goes.
	default:
		return nil, notRunning(rec)
	}
	suspender, ok := be.(backend.Suspender)
	if !ok {
		return nil, errdefs.NotImplemented("runtime %s cannot suspend or stop sandboxes", be.Name())
	}
	if inst != nil {
		inst.mu.Lock()
		running := inst.running
		inst.mu.Unlock()
		if running > 0 {
			return nil, errdefs.Conflict("sandbox %s runs %d command(s); suspending or stopping would kill them: wait for them, or delete the sandbox", id, running)
		}
	}
	// Whatever the caller does next, the sandbox ends up wholly halted or
	// still running.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if inst != nil && !inst.isPaused() { // a frozen agent answers nothing: the records stand
		m.noteRunningProcesses(sctx, inst)
	}
	// The change is recorded first: a daemon that dies half-way finishes
	// it when it starts again (Recover), and the time of the decision
	// shows at once, however long the runtime takes to tear down.
	m.setState(sctx, rec, halting, reason)
	if inst != nil {
		m.mu.Lock()
		delete(m.live, id)
		m.mu.Unlock()
		inst.close()
	}
	if err := suspender.Suspend(sctx, h, keepMemory); err != nil {
		m.setState(sctx, rec, store.StateError, halted+" failed: "+err.Error())
		return nil, err
	}
	m.setState(sctx, rec, halted, reason)
	m.log.Info("sandbox "+halted, attrSandbox, id, "reason", reason)
	return copyRecord(rec), nil
}

// Resume starts a suspended or stopped sandbox again, with its files as
// they were. Resuming a running one does nothing (a paused one is thawed).
func (m *Manager) Resume(ctx context.Context, id string) (*store.Sandbox, error) {
	if err := m.startStopped(ctx, id); err != nil {
		return nil, err
	}
	if _, err := m.instance(ctx, id); err != nil {
		return nil, err
	}
	return m.store.GetSandbox(ctx, id)
}

// startStopped starts sandbox id if it is stopped, which calls do not.
func (m *Manager) startStopped(ctx context.Context, id string) error {
	unlock := m.lockWake(id)
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil || rec.State != store.StateStopped {
		return err
	}
	_, err = m.resume(ctx, rec, "started by request")
	return err
}

// resume brings a suspended or stopped sandbox back and makes it live; the
// caller holds its wake lock.
func (m *Manager) resume(ctx context.Context, rec *store.Sandbox, reason string) (*instance, error) {
	be, ok := m.backends[rec.Backend]
	if !ok {
		return nil, errdefs.FailedPrecondition("sandbox %s: backend %q is not configured", rec.ID, rec.Backend)
	}
	suspender, ok := be.(backend.Suspender)
	if !ok {
		return nil, errdefs.NotImplemented("runtime %s cannot resume sandboxes", be.Name())
	}
	tmpl, err := m.templates.Version(rec.Template, rec.TemplateVersion)
	if err != nil {
		return nil, err
	}
	h := backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	opts := CreateOptions{CPUs: rec.CPUs, MemoryMB: rec.MemoryMB, Pids: rec.Pids, DiskMB: rec.DiskMB, Volumes: rec.Volumes}
	// The resume finishes even if the caller goes: half-resumed helps no one.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	began := time.Now()
	// Resuming is recorded first: a daemon that dies half-way suspends it
	// again when it starts (Recover), so that the next call resumes it
	// whole.
	was, why := rec.State, rec.StateReason
	m.setState(rctx, rec, store.StateResuming, reason)
	if err := suspender.Resume(rctx, h, m.spec(rec.ID, tmpl.RootDir, tmpl.Binds, opts)); err != nil {
		m.setState(rctx, rec, was, why)
		return nil, errors.Join(err, errdefs.Unavailable("sandbox %s could not be started again; it stays %s", rec.ID, was))
	}
	inst := newInstance(rec, be, h)
	m.restartProcesses(rctx, inst)
	m.mu.Lock()
	m.live[rec.ID] = inst
	m.mu.Unlock()
	m.setState(rctx, rec, store.StateRunning, reason)
	m.log.Info("sandbox resumed", attrSandbox, rec.ID, "reason", reason, "duration", time.Since(began))
	return inst, nil
}

// lockWake takes the lock that serialises changes of state of sandbox id
// (pause, thaw, suspend, resume), and returns its unlock.
func (m *Manager) lockWake(id string) func() {
	m.mu.Lock()
	l, ok := m.wakeLocks[id]
	if !ok {
		l = &wakeLock{}
		m.wakeLocks[id] = l
	}
	l.users++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.wakeLocks, id)
		}
		m.mu.Unlock()
	}
}

// wakeLock is a sandbox's lock for suspend and resume, kept while used.
type wakeLock struct {
	mu    sync.Mutex
	users int
}

// Keepalive changes a sandbox's idle timeout and, when action is not
// empty, its idle action, and counts as activity: the new timeout runs from
// now (E2B's setTimeout). A lifetime that is not 0 makes the sandbox expire
// that long from now. It does not wake a suspended sandbox. A timeout of 0
// leaves the idle timeout as it was.
func (m *Manager) Keepalive(ctx context.Context, id string, timeout time.Duration, action string, lifetime time.Duration) (*store.Sandbox, error) {
	if timeout == 0 && lifetime == 0 {
		return nil, errdefs.InvalidArgument("give idle_timeout_s, max_lifetime_s or both")
	}
	if timeout != 0 && (timeout < time.Second || timeout > maxIdleTimeout) {
		return nil, errdefs.InvalidArgument("idle_timeout_s must be between 1 and %d, got %d", int(maxIdleTimeout.Seconds()), int(timeout.Seconds()))
	}
	if lifetime != 0 {
		if err := checkMaxLifetime(lifetime); err != nil {
			return nil, errdefs.InvalidArgument("%v", err)
		}
	}
	if action != "" {
		if err := checkIdleAction(action); err != nil {
			return nil, errdefs.InvalidArgument("%v", err)
		}
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if timeout != 0 {
		rec.IdleTimeout = timeout
	}
	if action != "" {
		rec.IdleAction = action
	}
	rec.UpdatedAt = time.Now().UTC()
	if lifetime != 0 {
		rec.ExpiresAt = rec.UpdatedAt.Add(lifetime)
	}
	if err := m.store.UpdateSandbox(ctx, rec); err != nil {
		return nil, err
	}
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	if inst != nil {
		inst.mu.Lock()
		inst.idleTimeout, inst.lastActive = rec.IdleTimeout, time.Now()
		inst.mu.Unlock()
	}
	return copyRecord(rec), nil
}
