package core

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
	"go.opentelemetry.io/otel/trace"
)

// Halt says how a sandbox halts (Manager.Halt).
type Halt struct {
	// Stop ends its processes keeping its files only (no memory, even
	// under gVisor, so no disk for it either). Unlike a suspended sandbox,
	// a stopped one is not woken by calls: Resume starts it, with the
	// background processes that ran. A suspended sandbox can be stopped:
	// its kept memory goes.
	//
	// Otherwise it is suspended: it uses no memory and no CPU, keeping its
	// files, and its memory and processes where the runtime checkpoints
	// (gVisor); elsewhere they are gone, and the resume starts again the
	// background processes that ran. Any call that needs it (exec, code,
	// files) resumes it first; Resume does so explicitly. Suspending a
	// suspended sandbox does nothing.
	Stop bool
	// Reason says why, in its state.
	Reason string
}

// Halt suspends or stops a running (or paused) sandbox (see Halt).
func (m *Manager) Halt(ctx context.Context, id string, how Halt) (*store.Sandbox, error) {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return m.halt(ctx, id, how)
}

// Restart stops sandbox id (its memory dropped) if it runs, calls while
// with nothing of it running, and starts it again if it ran: from its
// files as while left them, restoring memory where while left an image
// the runtime restores (a checkpoint's rollback). A suspended or stopped
// sandbox stays so, its next start taking what while left. reason is the
// state's reason meanwhile. Whether while fails or not, a sandbox that ran
// runs again.
func (m *Manager) Restart(ctx context.Context, id, reason string, while func(be backend.Backend, h backend.Handle) error) (*store.Sandbox, error) {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	ran := rec.State == store.Running || rec.State == store.Paused
	switch {
	case ran:
		if _, err := m.halt(ctx, id, Halt{Stop: true, Reason: reason}); err != nil {
			return nil, err
		}
		if rec, err = m.store.GetSandbox(ctx, id); err != nil {
			return nil, err
		}
	case rec.State != store.Suspended && rec.State != store.Stopped:
		return nil, notRunning(rec)
	}
	be, h, err := m.backendOf(rec)
	if err != nil {
		return nil, err
	}
	werr := while(be, h)
	if ran {
		if _, err := m.resume(ctx, rec, reason); err != nil {
			return nil, errors.Join(werr, err)
		}
	}
	if werr != nil {
		return nil, werr
	}
	return m.Get(ctx, id)
}

// halt is Halt, under the sandbox's lock.
func (m *Manager) halt(ctx context.Context, id string, how Halt) (_ *store.Sandbox, err error) {
	keepMemory, reason := !how.Stop, how.Reason
	halting, halted := store.Suspending, store.Suspended
	if !keepMemory {
		halting, halted = store.Stopping, store.Stopped
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	was := rec.State
	if was == halted {
		return view(rec), nil
	}
	inst := m.liveInstance(id)
	be, h := m.runtimes.Get(rec.Backend), backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	switch {
	case inst != nil:
		be, h = inst.backend, inst.handle
	case !keepMemory && was == store.Suspended && be != nil:
		// store.Stopped where it is: its kept memory goes.
	default:
		return nil, notRunning(rec)
	}
	suspender := be.Capabilities().Suspend
	if suspender == nil {
		return nil, errdefs.NotImplemented("runtime %s cannot suspend or stop sandboxes", be.Name())
	}
	step := "suspend"
	if !keepMemory {
		step = "stop"
	}
	ctx, span := spans.Start(ctx, "sandbox."+step, spans.Sandbox.String(id), spans.Workspace.String(rec.Workspace), spans.Runtime.String(rec.Backend))
	defer func(began time.Time) {
		spans.End(span, err)
		m.observed(step, rec, began, err)
	}(time.Now())
	// Whatever the caller does next, the sandbox ends up wholly halted or
	// still running.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if inst != nil {
		if !inst.close(false) {
			return nil, errdefs.Conflict("sandbox %s has calls running; suspending or stopping would end them: wait for them, or delete the sandbox", id)
		}
		if !inst.isPaused() { // a frozen agent answers nothing
			m.hooks.Suspending(sctx, &Running{m: m, inst: inst})
		}
	}
	// The change is recorded first: a daemon that dies half-way finishes
	// it when it starts again (Recover), and the time of the decision
	// shows at once, however long the runtime takes to tear down.
	if err := m.transition(sctx, id, halting, reason, was); err != nil {
		if inst != nil {
			inst.reopen()
		}
		return nil, err
	}
	m.takeLive(id)
	if err := suspender.Suspend(sctx, h, keepMemory); err != nil {
		m.mustTransition(sctx, id, store.Error, string(halted)+" failed: "+err.Error(), halting)
		return nil, err
	}
	m.mustTransition(sctx, id, halted, reason, halting)
	m.log.Info("sandbox "+string(halted), attrSandbox, id, "reason", reason)
	if keepMemory {
		m.hooks.Suspended(id)
	}
	return m.Get(sctx, id)
}

// Resume starts a suspended, stopped or failed sandbox again, with its
// files as they were, and thaws a paused one. Resuming a running one does
// nothing.
func (m *Manager) Resume(ctx context.Context, id string) (*store.Sandbox, error) {
	ctx = causeOr(ctx, hook.CauseRequest)
	if inst := m.liveInstance(id); inst != nil {
		if err := m.thaw(ctx, inst, "unpaused by request"); err != nil {
			return nil, err
		}
	}
	if err := m.start(ctx, id); err != nil {
		return nil, err
	}
	_, release, _, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	release()
	return m.Get(ctx, id)
}

// start starts sandbox id if it is stopped, which calls do not.
func (m *Manager) start(ctx context.Context, id string) error {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil || rec.State != store.Stopped {
		return err
	}
	_, err = m.resume(ctx, rec, "started by request")
	return err
}

// resume brings a suspended, stopped or failed sandbox back and makes it
// live; the caller holds its lock.
func (m *Manager) resume(ctx context.Context, rec *store.Sandbox, reason string) (_ *instance, err error) {
	be := m.runtimes.Get(rec.Backend)
	if be == nil {
		return nil, errdefs.FailedPrecondition("sandbox %s: backend %q is not configured", rec.ID, rec.Backend)
	}
	suspender := be.Capabilities().Suspend
	if suspender == nil {
		return nil, errdefs.NotImplemented("runtime %s cannot resume sandboxes", be.Name())
	}
	tmpl, err := m.templates.Version(rec.Template, rec.TemplateVersion)
	if err != nil {
		return nil, err
	}
	h := backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	opts := create.Options{CPUs: rec.CPUs, MemoryMB: rec.MemoryMB, Pids: rec.Pids, DiskMB: rec.DiskMB, Volumes: rec.Volumes}
	// The resume finishes even if the caller goes: half-resumed helps no one.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	began := time.Now()
	ctx, span := spans.Start(ctx, "sandbox.resume", spans.Sandbox.String(rec.ID), spans.Workspace.String(rec.Workspace), spans.Runtime.String(rec.Backend))
	rctx = trace.ContextWithSpan(rctx, span)
	defer func() {
		spans.End(span, err)
		m.observed("resume", rec, began, err)
	}()
	// store.Resuming is recorded first: a daemon that dies half-way suspends it
	// again when it starts (Recover), so that the next call resumes it
	// whole.
	was, why := rec.State, rec.StateReason
	// It runs again: it is admitted as a create is, without its disk
	// (counted already).
	release, err := m.hooks.Admit(ctx, hook.Admission{Workspace: rec.Workspace, MemoryMB: rec.MemoryMB, CPUs: rec.CPUs})
	if err != nil {
		return nil, err
	}
	err = m.transition(rctx, rec.ID, store.Resuming, reason, was)
	release()
	if err != nil {
		return nil, err
	}
	spec := m.spec(rec.ID, tmpl.RootDir, tmpl.Binds, opts)
	// Moved here from another node: made from its image first.
	ictx, importing := spans.Start(rctx, "import")
	imported, err := m.hooks.Import(ictx, rec, spec)
	spans.End(importing, err)
	switch {
	case err != nil:
		m.mustTransition(rctx, rec.ID, was, why, store.Resuming)
		return nil, err
	case imported != nil:
		h = *imported
		if err := m.store.ChangeState(rctx, store.StateChange{ID: rec.ID, From: []store.State{store.Resuming}, To: store.Resuming, Reason: reason, At: m.clock.Now().UTC(), Handle: h.State}); err != nil {
			return nil, errors.Join(err, be.Destroy(rctx, h))
		}
	}
	sctx, resuming := spans.Start(rctx, "runtime.resume")
	err = suspender.Resume(sctx, h, spec)
	spans.End(resuming, err)
	if err != nil {
		m.mustTransition(rctx, rec.ID, was, why, store.Resuming)
		return nil, errors.Join(err, errdefs.Unavailable("sandbox %s could not be started again; it stays %s", rec.ID, was))
	}
	inst := newInstance(rec, be, h, m.clock)
	if err := m.startHooks(rctx, inst, rec.Network); err != nil {
		m.log.Error("hooks of a resumed sandbox not started: without its network its connections are refused", attrSandbox, rec.ID, "error", err)
	}
	m.hooks.Resumed(rctx, &Running{m: m, inst: inst})
	m.setLive(inst)
	m.mustTransition(rctx, rec.ID, store.Running, reason, store.Resuming)
	m.log.Info("sandbox resumed", attrSandbox, rec.ID, "reason", reason, "duration", time.Since(began))
	return inst, nil
}

// Update is what a call changes of a sandbox (PATCH /v1/sandboxes/{id}).
type Update struct {
	// Its timers: IdleTimeout (0: as it is), IdleAction ("": as it is),
	// and Lifetime, from now (0: as it is). An update of its timers, or
	// of nothing, counts as activity: the timeout runs from now (E2B's
	// setTimeout). It does not wake a suspended sandbox.
	IdleTimeout time.Duration
	IdleAction  string
	Lifetime    time.Duration
	// Env and Metadata replace its own (nil: as they are): its next
	// command sees the env, running or not.
	Env, Metadata map[string]string
	// CPUs, MemoryMB and Pids (0: as they are) are its limits: in place
	// while it runs, where its runtime can (backend.Resizer), their
	// growth admitted against its workspace's quota; while it does not
	// run (suspended, stopped or in error), for its next start, whose
	// admission checks them.
	CPUs     float64
	MemoryMB int64
	Pids     int64
	// DiskMB (0: as it is) grows its disk, running or not, its growth
	// admitted against its workspace's quota; a disk never shrinks.
	DiskMB int64
	// Volumes (nil: as they are) replaces the volumes of a suspended or
	// stopped sandbox, checked as a create's, from its next start.
	Volumes *[]store.VolumeMount
}

func (u Update) timers() bool { return u.IdleTimeout != 0 || u.IdleAction != "" || u.Lifetime != 0 }

func (u Update) shape() bool {
	return u.Env != nil || u.Metadata != nil || u.CPUs != 0 || u.MemoryMB != 0 || u.Pids != 0 || u.DiskMB != 0 || u.Volumes != nil
}

// Update changes what u names of sandbox id. It changes the timers and
// the shape only, so it never undoes a change of state made meanwhile.
func (m *Manager) Update(ctx context.Context, id string, u Update) (*store.Sandbox, error) {
	if err := create.CheckKeepalive(u.IdleTimeout, u.IdleAction, u.Lifetime); err != nil && (u.timers() || !u.shape()) {
		return nil, err
	}
	if u.shape() {
		if err := m.reshape(ctx, id, u); err != nil {
			return nil, err
		}
	}
	if !u.timers() && u.shape() {
		return m.Get(ctx, id)
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	now := m.clock.Now()
	t := store.Timers{IdleTimeout: rec.IdleTimeout, IdleAction: rec.IdleAction, ExpiresAt: rec.ExpiresAt, At: now.UTC()}
	if u.IdleTimeout != 0 {
		t.IdleTimeout = u.IdleTimeout
	}
	if u.IdleAction != "" {
		t.IdleAction = u.IdleAction
	}
	if u.Lifetime != 0 {
		t.ExpiresAt = t.At.Add(u.Lifetime)
	}
	if err := m.store.SetTimers(ctx, id, t); err != nil {
		return nil, err
	}
	if inst := m.liveInstance(id); inst != nil {
		inst.mu.Lock()
		inst.idleTimeout, inst.lastActive = t.IdleTimeout, now
		inst.mu.Unlock()
	}
	return m.Get(ctx, id)
}

// resize changes the limits of running sandbox rec in place, as u asks,
// within its workspace's quota (release ends the admission of its growth);
// where its runtime cannot, or cannot now, it says so and changes nothing.
func (m *Manager) resize(ctx context.Context, rec *store.Sandbox, u Update) (release func(), err error) {
	inst := m.liveInstance(rec.ID)
	if inst == nil || inst.isPaused() {
		return nil, errdefs.FailedPrecondition("sandbox %s is %s: its limits change while it runs, or while it is suspended or stopped (for its next start)", rec.ID, rec.State)
	}
	resizer := inst.backend.Capabilities().Resize
	if resizer == nil {
		return nil, errdefs.FailedPrecondition("runtime %s cannot change a running sandbox's limits: suspend it, change them, and resume it", inst.backend.Name())
	}
	grow := hook.Admission{Workspace: rec.Workspace, Growth: true,
		MemoryMB: max(0, u.MemoryMB-rec.MemoryMB), CPUs: max(0, u.CPUs-rec.CPUs)}
	if release, err = m.hooks.Admit(ctx, grow); err != nil {
		return nil, err
	}
	if err := resizer.Resize(ctx, inst.handle, backend.Limits{CPUs: u.CPUs, MemoryBytes: u.MemoryMB << 20, Pids: u.Pids}); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// growDisk grows sandbox rec's disk to sizeMB in place, running or not,
// within its workspace's quota (release ends the admission of its
// growth). The caller holds its lock.
func (m *Manager) growDisk(ctx context.Context, rec *store.Sandbox, sizeMB int64) (release func(), err error) {
	if sizeMB < rec.DiskMB {
		return nil, errdefs.FailedPrecondition("sandbox %s has a disk of %d MiB: a disk grows, it never shrinks", rec.ID, rec.DiskMB)
	}
	if err := m.checkHeld(rec); err != nil {
		return nil, err
	}
	be, h, err := m.backendOf(rec)
	if err != nil {
		return nil, err
	}
	if be.Capabilities().GrowDisk == nil {
		return nil, errdefs.FailedPrecondition("runtime %s cannot grow a sandbox's disk", rec.Backend)
	}
	if release, err = m.hooks.Admit(ctx, hook.Admission{Workspace: rec.Workspace, Growth: true, DiskMB: sizeMB - rec.DiskMB}); err != nil {
		return nil, err
	}
	if err := be.Capabilities().GrowDisk.GrowDisk(ctx, h, sizeMB<<20); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// reshape sets sandbox id's env, metadata and limits as u says, under its
// lock: limits in place while it runs (where its runtime can), or for its
// next start while it does not.
func (m *Manager) reshape(ctx context.Context, id string, u Update) error {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	limits := u.CPUs != 0 || u.MemoryMB != 0 || u.Pids != 0
	halted := rec.State == store.Suspended || rec.State == store.Stopped || rec.State == store.Error
	s := store.Shape{Env: rec.Env, Metadata: rec.Metadata, CPUs: cmp.Or(u.CPUs, rec.CPUs), MemoryMB: cmp.Or(u.MemoryMB, rec.MemoryMB),
		Pids: cmp.Or(u.Pids, rec.Pids), DiskMB: cmp.Or(u.DiskMB, rec.DiskMB), Volumes: rec.Volumes, At: m.clock.Now().UTC()}
	if u.Env != nil {
		s.Env = u.Env
	}
	if u.Metadata != nil {
		s.Metadata = u.Metadata
	}
	// The bounds of a create's (the rest as the record has it).
	check := create.Options{CPUs: s.CPUs, MemoryMB: s.MemoryMB, Pids: s.Pids, DiskMB: s.DiskMB, Env: s.Env, Workspace: rec.Workspace,
		IdleTimeout: rec.IdleTimeout, IdleAction: rec.IdleAction, MaxLifetime: time.Hour}
	if _, _, err := check.WithDefaults(); err != nil {
		return err
	}
	if limits && !halted {
		release, err := m.resize(ctx, rec, u)
		if err != nil {
			return err
		}
		defer release() // once the record has the new limits
	}
	if u.Volumes != nil {
		if !halted {
			return errdefs.FailedPrecondition("sandbox %s is %s: its volumes change while it is suspended or stopped, for its next start", id, rec.State)
		}
		vols := create.Options{Workspace: rec.Workspace, User: rec.User, Volumes: *u.Volumes}
		if err := m.hooks.Prepare(ctx, &vols); err != nil { // checked and defaulted as a create's
			return err
		}
		s.Volumes = slices.Clip(vols.Volumes)
		if s.Volumes == nil {
			s.Volumes = []store.VolumeMount{}
		}
	}
	if s.DiskMB != rec.DiskMB {
		release, err := m.growDisk(ctx, rec, s.DiskMB)
		if err != nil {
			return err
		}
		defer release() // once the record has the new size
	}
	if err := m.store.Reshape(ctx, id, s); err != nil {
		return err
	}
	if inst := m.liveInstance(id); inst != nil {
		inst.mu.Lock()
		inst.env = s.Env
		inst.mu.Unlock()
	}
	m.log.Info("sandbox reshaped", attrSandbox, id, "cpus", s.CPUs, "memory_mb", s.MemoryMB, "pids", s.Pids, "disk_mb", s.DiskMB, "env", len(s.Env), "metadata", len(s.Metadata))
	return nil
}
