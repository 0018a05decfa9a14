package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"go.opentelemetry.io/otel/attribute"
)

// create makes and starts a sandbox and returns it once its agent answers.
// On failure nothing of it remains.
func (m *Manager) create(ctx context.Context, opts create.Options) (sb *store.Sandbox, err error) {
	step, began := hook.Step{Name: "create"}, time.Now()
	ctx, span := spans.Start(ctx, "sandbox.create")
	defer func() {
		if sb != nil {
			step.Sandbox = sb.ID
		}
		span.SetAttributes(spans.Sandbox.String(step.Sandbox), spans.Workspace.String(step.Workspace), spans.Runtime.String(step.Runtime),
			spans.Template.String(opts.Template), attribute.String("hutch.warm_pool", step.Pool))
		spans.End(span, err)
		step.Took, step.Err = time.Since(began), err
		m.hooks.Observed(step)
	}()
	opts, files, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	step.Workspace = opts.Workspace
	pctx, prepare := spans.Start(ctx, "prepare")
	err = m.hooks.Prepare(pctx, &opts)
	spans.End(prepare, err)
	if err != nil {
		return nil, err
	}
	policy := netpolicy.Policy{Mode: netpolicy.Full}
	if opts.Network != nil {
		policy = *opts.Network
	}
	release, err := m.hooks.Admit(ctx, hook.Admission{Workspace: opts.Workspace, MemoryMB: opts.MemoryMB, CPUs: opts.CPUs, DiskMB: opts.DiskMB})
	if err != nil {
		return nil, err
	}
	admitted := sync.OnceFunc(release)
	defer admitted()
	tmpl, err := m.templates.Get(opts.Template)
	if err != nil {
		return nil, err
	}
	if opts.FromSnapshot != "" {
		if info, err := m.templates.Info(opts.FromSnapshot); err != nil || info.Source != rootfs.SourceSnapshot {
			return nil, errdefs.InvalidArgument("%s is not a snapshot (hutch template ls shows their source)", opts.FromSnapshot)
		}
	}
	opts.Env = withEnv(tmpl.Env, opts.Env) // a Hutchfile's ENV, under the create's
	// What deleted sandboxes still hold is bounded: a new one waits for
	// their teardowns when too many are behind.
	if err := m.teardowns.WaitFewer(ctx); err != nil {
		return nil, err
	}
	be, err := m.runtimes.For(ctx, opts.Runtime, m.clock.Now())
	if err != nil {
		return nil, err
	}
	step.Runtime = be.Name()
	// A pool's sandboxes run already: files go in before the start, and a
	// snapshot's memory is the start; volumes are mounted into one where
	// the runtime can (not gVisor).
	attacher := be.Capabilities().Attach
	if len(files) == 0 && (len(opts.Volumes) == 0 || attacher != nil) && tmpl.Memory == "" {
		var sb pooled
		switch sb, step.Pool = m.takePooled(opts, be.Name()); {
		case step.Pool == poolHit && sb.version == tmpl.Version:
			var err error
			if len(opts.Volumes) > 0 {
				err = attacher.Attach(ctx, sb.handle, m.volumeBinds(opts))
			}
			if err == nil {
				return m.adopt(ctx, sb, opts, policy, admitted)
			}
			m.log.Warn("a warm pool's sandbox did not take the create's volumes: made anew", attrSandbox, sb.id, "error", err)
			go m.destroyPooled(sb)
			step.Pool = poolMiss
		case step.Pool == poolHit:
			go m.destroyPooled(sb) // made before a rebuild
			step.Pool = poolMiss
		}
	}
	now := m.clock.Now().UTC()
	rec := &store.Sandbox{
		ID: create.NewID(), Workspace: opts.Workspace, User: opts.User, Secrets: opts.Secrets, Template: tmpl.Name, TemplateVersion: tmpl.Version, Backend: be.Name(), State: store.Creating,
		CPUs: opts.CPUs, MemoryMB: opts.MemoryMB, Pids: opts.Pids, DiskMB: opts.DiskMB, IdleTimeout: opts.IdleTimeout, IdleAction: opts.IdleAction, Key: opts.Key,
		Checkpoints: opts.Checkpoints, OnSuspend: opts.OnSuspend, OnResume: opts.OnResume, Env: opts.Env, Metadata: opts.Metadata, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(opts.MaxLifetime),
		Volumes: slices.Clip(slices.Clone(opts.Volumes)), Network: policy, Node: m.node,
	}
	// Locked before anyone can know its ID: a Delete that finds it in a
	// list waits for the create to end.
	unlock, err := m.locks.Lock(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	err = m.store.CreateSandbox(ctx, rec)
	admitted() // it counts now (its record says so)
	if err != nil {
		return nil, err
	}
	log := m.log.With(attrSandbox, rec.ID, attrBackend, be.Name())
	var h backend.Handle
	made := false
	defer func() {
		if err == nil {
			return
		}
		// The backend rolled back its part of a failed Create; what came
		// after goes here, and the record with it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if made {
			if derr := be.Destroy(cctx, h); derr != nil {
				log.Error("roll back sandbox", "error", derr)
			}
		}
		if derr := m.store.DeleteSandbox(cctx, rec.ID); derr != nil {
			log.Error("drop record of failed sandbox", "error", derr)
		}
	}()

	spec := m.spec(rec.ID, tmpl.RootDir, tmpl.Binds, opts)
	maps.Copy(spec.Files, files)
	if tmpl.MemoryRuntime == be.Name() {
		spec.Restore = tmpl.Memory // a snapshot's processes go on
	}
	rctx, runtime := spans.Start(ctx, "runtime.create", spans.Runtime.String(be.Name()))
	h, err = be.Create(rctx, spec)
	spans.End(runtime, err)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", rec.ID, err)
	}
	made = true
	inst := newInstance(rec, be, h, m.clock)
	if err := m.startHooks(ctx, inst, policy); err != nil {
		m.hooks.Deleted(rec.ID) // what the hooks keep of it
		return nil, err
	}
	defer func() {
		if err != nil {
			inst.stopHooks()
			m.hooks.Deleted(rec.ID)
		}
	}()
	if err := m.transitionHandle(ctx, rec.ID, h.State, store.Running, "created", store.Creating); err != nil {
		return nil, err
	}
	rec.Handle, rec.State, rec.StateReason = h.State, store.Running, "created"
	m.setLive(inst)
	log.Info("sandbox created", "template", rec.Template, "duration", time.Since(now))
	return view(rec), nil
}

// volumeBinds are the binds opts's volumes add to those of a create
// without them, which a pool's sandbox has.
func (m *Manager) volumeBinds(opts create.Options) []backend.Bind {
	without := opts
	without.Volumes = nil
	has := m.hooks.Binds(&without)
	return slices.DeleteFunc(m.hooks.Binds(&opts), func(b backend.Bind) bool {
		return slices.ContainsFunc(has, func(h backend.Bind) bool { return h.Destination == b.Destination })
	})
}

// adopt makes a pool sandbox the caller's: one insert into the store,
// after which admitted ends its admission.
func (m *Manager) adopt(ctx context.Context, sb pooled, opts create.Options, policy netpolicy.Policy, admitted func()) (*store.Sandbox, error) {
	now := m.clock.Now().UTC()
	rec := &store.Sandbox{
		ID: sb.id, Workspace: opts.Workspace, User: opts.User, Secrets: opts.Secrets, Template: opts.Template, TemplateVersion: sb.version, Backend: sb.be.Name(), State: store.Running,
		StateReason: "created", CPUs: opts.CPUs, MemoryMB: opts.MemoryMB, Pids: opts.Pids, DiskMB: opts.DiskMB,
		IdleTimeout: opts.IdleTimeout, IdleAction: opts.IdleAction, Key: opts.Key, Checkpoints: opts.Checkpoints,
		OnSuspend: opts.OnSuspend, OnResume: opts.OnResume,
		Env: opts.Env, Metadata: opts.Metadata, Handle: sb.handle.State, CreatedAt: now, UpdatedAt: now,
		ExpiresAt: now.Add(opts.MaxLifetime), Network: policy, Node: m.node, Volumes: slices.Clip(slices.Clone(opts.Volumes)),
	}
	err := m.store.CreateSandbox(ctx, rec)
	admitted() // it counts now (its record says so)
	if err != nil {
		go m.destroyPooled(sb)
		return nil, err
	}
	if m.hooks.Changes() {
		m.changedTo(ctx, rec, store.Creating, rec.StateReason)
	}
	// Its network is served already, refusing everything: now by its
	// policy (prepared by create).
	inst := sb.inst
	m.hooks.Claimed(ctx, hook.Live{ID: inst.id, Backend: inst.backend, Handle: inst.handle, Agent: inst.agent, Network: policy})
	inst.mu.Lock()
	inst.idleTimeout, inst.env, inst.owner, inst.lastActive = rec.IdleTimeout, rec.Env, ownerOf(rec), m.clock.Now()
	inst.mu.Unlock()
	m.setLive(inst)
	m.log.Info("sandbox created", attrSandbox, rec.ID, attrBackend, rec.Backend, "template", rec.Template, "from_pool", true)
	return view(rec), nil
}

// Place is where a sandbox belongs: the workspace that owns it and the
// node that holds it.
type Place struct {
	ID, Workspace string
	// Node holds it ("" on a single box); here is this daemon's node.
	Node, here string
}

// Held is nil if this daemon holds the sandbox, and an
// errdefs.HeldElsewhere naming the node that does otherwise: a node acts
// only on its own sandboxes, whose files are on its disk.
func (p Place) Held() error {
	if p.Node != p.here {
		return &errdefs.HeldElsewhere{ID: p.ID, Node: p.Node, Here: p.here}
	}
	return nil
}

// Locate says where sandbox id belongs: from memory when it runs here (a
// check made on every call that names a sandbox), else from its record.
func (m *Manager) Locate(ctx context.Context, id string) (Place, error) {
	if inst := m.liveInstance(id); inst != nil {
		inst.mu.Lock()
		ws := inst.owner.workspace
		inst.mu.Unlock()
		if ws != "" {
			return Place{ID: id, Workspace: ws, Node: m.node, here: m.node}, nil
		}
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return Place{}, err
	}
	if rec.State == store.Deleting {
		return Place{}, deletedError(id)
	}
	return Place{ID: id, Workspace: rec.Workspace, Node: rec.Node, here: m.node}, nil
}

// Locked runs fn with sandbox id's backend and handle under its lock,
// whatever its state, without waking it: for what a sandbox keeps on its
// disk while suspended (its checkpoints). The sandbox must be this
// daemon's and not on its way out.
func (m *Manager) Locked(ctx context.Context, id string, fn func(be backend.Backend, h backend.Handle) error) error {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if err := m.checkHeld(rec); err != nil {
		return err
	}
	if rec.State == store.Deleting {
		return deletedError(id)
	}
	be, h, err := m.backendOf(rec)
	if err != nil {
		return err
	}
	return fn(be, h)
}

// backendOf is sandbox rec's backend and handle: its live instance's when
// it runs here, else its record's.
func (m *Manager) backendOf(rec *store.Sandbox) (backend.Backend, backend.Handle, error) {
	if inst := m.liveInstance(rec.ID); inst != nil {
		return inst.backend, inst.handle, nil
	}
	be := m.runtimes.Get(rec.Backend)
	if be == nil {
		return nil, backend.Handle{}, errdefs.FailedPrecondition("sandbox %s: backend %q is not configured", rec.ID, rec.Backend)
	}
	return be, backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}, nil
}

// held are the sandboxes this daemon holds: on a single box all of them,
// among nodes those of its name.
func (m *Manager) held(ctx context.Context) ([]*store.Sandbox, error) {
	recs, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r *store.Sandbox) bool { return r.Node != m.node }), nil
}

// checkHeld is Place.Held of sandbox rec.
func (m *Manager) checkHeld(rec *store.Sandbox) error {
	if rec.Node != m.node {
		return &errdefs.HeldElsewhere{ID: rec.ID, Node: rec.Node, Here: m.node}
	}
	return nil
}

// List returns every sandbox's record.
func (m *Manager) List(ctx context.Context) ([]*store.Sandbox, error) {
	recs, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	recs = slices.DeleteFunc(recs, func(r *store.Sandbox) bool { return r.State == store.Deleting })
	return views(recs), nil
}

// wakes are the states a call brings a sandbox back from by itself: a
// suspended sandbox resumes, and one that failed starts again on its
// files. A stopped one waits for a start.
var wakes = []store.State{store.Suspended, store.Error}

// acquire returns sandbox id running, thawed if it was paused and started
// again if it was suspended or had failed, and counts a call in flight
// until release is called: meanwhile the idle timer leaves it alone and a
// suspend or stop is refused (a delete is not). Every call that needs a
// sandbox's agent goes through here. woken says the sandbox was started
// again for the call (by it, or by one it waited for): what listened in it
// may not listen yet.
func (m *Manager) acquire(ctx context.Context, id string) (inst *instance, release func(), woken bool, err error) {
	for range 3 { // a sandbox halted between two looks is looked at again
		if inst := m.liveInstance(id); inst != nil {
			if !inst.hold(m.clock.Now()) {
				// Being halted or deleted: wait for that to end.
				unlock, err := m.locks.Lock(ctx, id)
				if err != nil {
					return nil, nil, false, err
				}
				unlock()
				continue
			}
			// A paused sandbox wakes for any call that needs it.
			if err := m.thaw(ctx, inst, "woken by a call"); err != nil {
				inst.release(m.clock.Now())
				return nil, nil, false, err
			}
			return inst, func() { inst.release(m.clock.Now()) }, woken, nil
		}
		rec, err := m.store.GetSandbox(ctx, id)
		if err != nil {
			return nil, nil, false, err
		}
		if err := m.checkHeld(rec); err != nil {
			return nil, nil, false, err // its files are on another node's disk
		}
		if !slices.Contains(wakes, rec.State) && !store.Transient(rec.State) {
			return nil, nil, false, notRunning(rec)
		}
		if err := m.wake(ctx, id); err != nil {
			return nil, nil, false, err
		}
		woken = true // by this call, or by one it waited for
	}
	return nil, nil, false, errdefs.Unavailable("sandbox %s keeps changing state; try again", id)
}

// wake resumes sandbox id if it is still in a state calls wake it from,
// once: calls that come meanwhile wait for it.
func (m *Manager) wake(ctx context.Context, id string) error {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if m.liveInstance(id) != nil {
		return nil // woken meanwhile
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	reason := "woken by a call"
	ctx = causeOr(ctx, hook.CauseWoken)
	switch rec.State {
	case store.Suspended:
	case store.Error:
		reason = "started again by a call after an error: " + rec.StateReason
	default:
		return notRunning(rec)
	}
	_, err = m.resume(ctx, rec, reason)
	return err
}

// NotRunning is the error of a call that needs sandbox sb live (running
// or paused) when it is not.
func NotRunning(sb *store.Sandbox) error {
	if sb.State == store.Running || sb.State == store.Paused {
		return nil
	}
	return notRunning(sb)
}

// notRunning is the error of a call to a sandbox that is not running.
func notRunning(rec *store.Sandbox) error {
	if rec.State == store.Stopped {
		return errdefs.FailedPrecondition("sandbox %s is stopped%s: start it with POST /v1/sandboxes/%s/start (hutch start %s)",
			rec.ID, reasonSuffix(rec.StateReason), rec.ID, rec.ID)
	}
	return errdefs.FailedPrecondition("sandbox %s is %s, not running%s", rec.ID, rec.State, reasonSuffix(rec.StateReason))
}

// notLive says why sandbox id is not live, without waking it.
func (m *Manager) notLive(ctx context.Context, id string) error {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	return notRunning(rec)
}

// lostAgent is what a call whose connection to the agent broke returns.
// The agent is the sandbox's PID 1: when a fresh connection finds it gone,
// the sandbox's container has ended, so the sandbox is marked error
// (keeping its files: the next call starts it again) and the call says so.
// When the agent answers, err stands.
func (m *Manager) lostAgent(ctx context.Context, inst *instance, err error) error {
	inst.agent.CloseIdleConnections()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	herr := inst.agent.Health(hctx)
	cancel()
	if herr == nil {
		return err
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	unlock, lerr := m.locks.Lock(lctx, inst.id)
	if lerr != nil {
		return err
	}
	defer unlock()
	if !m.isLive(inst) {
		// Halted, deleted or found lost meanwhile: its state says which.
		if rec, gerr := m.store.GetSandbox(lctx, inst.id); gerr == nil && rec.State == store.Error {
			return lostError(rec.ID, rec.StateReason)
		}
		return err
	}
	reason := "its agent stopped answering while a call ran"
	m.markLost(lctx, inst, reason)
	return lostError(inst.id, reason)
}

// callErr is the error of a call to a sandbox the caller held (see
// acquire): when the sandbox was deleted under it, that is what it says,
// rather than how the agent's going away looked.
func (m *Manager) callErr(ctx context.Context, inst *instance, err error) error {
	if err == nil || m.isLive(inst) {
		return err
	}
	rec, gerr := m.store.GetSandbox(context.WithoutCancel(ctx), inst.id)
	if errors.Is(gerr, errdefs.ErrNotFound) || gerr == nil && rec.State == store.Deleting {
		return errdefs.NotFound("sandbox %s was deleted while the call ran", inst.id)
	}
	return err
}

func lostError(id, reason string) error {
	return errdefs.Unavailable("sandbox %s stopped: %s; its files are kept, and the next call starts it again", id, reason)
}

// markLost records that a live sandbox's container ended by itself, says
// why, and cleans up what is left of the container, keeping its files (a
// start, or the next call, starts it again on them). The caller holds the
// sandbox's lock.
func (m *Manager) markLost(ctx context.Context, inst *instance, reason string) {
	m.takeLive(inst.id)
	inst.close(true)
	m.mustTransition(ctx, inst.id, store.Error, reason, store.Running, store.Paused)
	m.keepFiles(ctx, inst.backend, inst.handle)
	m.log.Warn("sandbox stopped", attrSandbox, inst.id, "reason", reason)
}

// keepFiles removes a failed sandbox's container and unmounts its root,
// keeping its directory and disk, as a stop does.
func (m *Manager) keepFiles(ctx context.Context, be backend.Backend, h backend.Handle) {
	suspender := be.Capabilities().Suspend
	if suspender == nil {
		if err := be.Destroy(ctx, h); err != nil {
			m.log.Error("clean up stopped sandbox", attrSandbox, h.ID, "error", err)
		}
		return
	}
	if err := suspender.Suspend(ctx, h, false); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Error("clean up stopped sandbox", attrSandbox, h.ID, "error", err)
	}
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// liveInstance returns sandbox id's running instance, or nil.
func (m *Manager) liveInstance(id string) *instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// setLive makes inst its sandbox's running instance, watched: when its
// container ends by itself, the sandbox is marked at once (see ended).
func (m *Manager) setLive(inst *instance) {
	m.mu.Lock()
	m.live[inst.id] = inst
	m.mu.Unlock()
	m.watch(inst, func(reason string) { m.ended(inst, reason) })
}

// takeLive removes sandbox id's running instance, ending its watch, and
// returns it (nil if none).
func (m *Manager) takeLive(id string) *instance {
	m.mu.Lock()
	inst := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()
	if inst != nil {
		inst.unwatch()
		inst.stopHooks()
	}
	return inst
}

// watch has ended told when inst's container ends by itself, until
// inst.unwatch. A backend that cannot watch leaves it to the next call to
// find out (see lostAgent). An instance watched already (a pool's, handed
// over) keeps its watch and tells ended instead: the backend's watch
// reads the container's pid and cgroup files, ~0.1–0.5 ms of a claim.
func (m *Manager) watch(inst *instance, ended func(reason string)) {
	w := inst.backend.Capabilities().Watch
	if w == nil || inst.whenEnded(ended) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Watch(ctx, inst.handle, inst.containerEnded); err != nil {
		cancel()
		m.log.Warn("sandbox not watched: its end is found at the next call", attrSandbox, inst.id, "error", err)
		return
	}
	inst.setUnwatch(cancel)
}

// ended marks a live sandbox whose container ended by itself, with what
// was seen, unless it was halted or deleted meanwhile.
func (m *Manager) ended(inst *instance, reason string) {
	m.reaps.Add(1)
	defer m.reaps.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unlock, err := m.locks.Lock(ctx, inst.id)
	if err != nil {
		return
	}
	defer unlock()
	if m.isLive(inst) {
		m.markLost(ctx, inst, reason)
	}
}

// isLive reports whether inst is still its sandbox's running instance.
func (m *Manager) isLive(inst *instance) bool {
	return m.liveInstance(inst.id) == inst
}
