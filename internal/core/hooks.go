package core

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The kernel's steps run the hooks attached to them (internal/core/hook):
// each step runs those of Config.Hooks that implement its interface, in
// that order.

// suspendingHooks runs every Suspender's Suspending for inst.
func (m *Manager) suspendingHooks(ctx context.Context, inst *instance) {
	for _, h := range m.hooks {
		if s, ok := h.(hook.Suspender); ok {
			s.Suspending(ctx, &Running{m: m, inst: inst})
		}
	}
}

// resumedHooks runs every Resumer's Resumed for inst.
func (m *Manager) resumedHooks(ctx context.Context, inst *instance) {
	for _, h := range m.hooks {
		if r, ok := h.(hook.Resumer); ok {
			r.Resumed(ctx, &Running{m: m, inst: inst})
		}
	}
}

// prepare runs every Preparer's Prepare on opts, which they may fill in.
func (m *Manager) prepare(ctx context.Context, opts *create.Options) error {
	for _, h := range m.hooks {
		if p, ok := h.(hook.Preparer); ok {
			if err := p.Prepare(ctx, opts); err != nil {
				return err
			}
		}
	}
	return nil
}

// startHooks runs every Starter's Start for inst, whose network policy is
// policy, keeping what stops them in inst (see instance.stopHooks). A
// failure stops those started before it.
func (m *Manager) startHooks(ctx context.Context, inst *instance, policy netpolicy.Policy) error {
	l := hook.Live{ID: inst.id, Backend: inst.backend, Handle: inst.handle, Network: policy}
	for _, h := range m.hooks {
		s, ok := h.(hook.Starter)
		if !ok {
			continue
		}
		stop, err := s.Start(ctx, l)
		if err != nil {
			inst.stopHooks()
			return fmt.Errorf("%s: %w", h.Name(), err)
		}
		inst.addStop(stop)
	}
	return nil
}

// claimed tells every Claimer that a warm pool's sandbox is a caller's.
func (m *Manager) claimed(ctx context.Context, inst *instance, policy netpolicy.Policy) {
	l := hook.Live{ID: inst.id, Backend: inst.backend, Handle: inst.handle, Network: policy}
	for _, h := range m.hooks {
		if c, ok := h.(hook.Claimer); ok {
			c.Claimed(ctx, l)
		}
	}
}

// deleted tells every Deleter that sandbox id is gone.
func (m *Manager) deleted(id string) {
	for _, h := range m.hooks {
		if d, ok := h.(hook.Deleter); ok {
			d.Deleted(id)
		}
	}
}

// commandEnv is the environment of a command run in inst for user ("":
// the sandbox's) with env of its own: the sandbox's, what the Envers add
// over it, the command's over them.
func (m *Manager) commandEnv(ctx context.Context, inst *instance, user string, env map[string]string) (map[string]string, error) {
	inst.mu.Lock()
	owner := inst.owner
	inst.mu.Unlock()
	if user == "" {
		user = owner.user
	}
	c := hook.Command{Sandbox: inst.id, Workspace: owner.workspace, User: user, Secrets: owner.names}
	out := maps.Clone(inst.env)
	if out == nil {
		out = map[string]string{}
	}
	for _, h := range m.hooks {
		if e, ok := h.(hook.Enver); ok {
			if err := e.CommandEnv(ctx, c, out); err != nil {
				return nil, err
			}
		}
	}
	maps.Copy(out, env)
	return out, nil
}

// hookBinds are the binds every Binder adds to a sandbox made with opts.
func (m *Manager) hookBinds(opts *create.Options) []backend.Bind {
	var binds []backend.Bind
	for _, h := range m.hooks {
		if b, ok := h.(hook.Binder); ok {
			binds = append(binds, b.Binds(opts)...)
		}
	}
	return binds
}

// admit runs every Admitter's Admit for a; release ends them all. A
// refusal releases those admitted before it.
func (m *Manager) admit(ctx context.Context, a hook.Admission) (release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, h := range m.hooks {
		ad, ok := h.(hook.Admitter)
		if !ok {
			continue
		}
		r, err := ad.Admit(ctx, a)
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
	}
	return release, nil
}

// tickHooks runs every Ticker's Tick.
func (m *Manager) tickHooks(ctx context.Context, now time.Time) {
	for _, h := range m.hooks {
		if t, ok := h.(hook.Ticker); ok {
			t.Tick(ctx, now)
		}
	}
}

// kernel is what the kernel lends its hooks (hook.Kernel).
type kernel struct{ m *Manager }

func (k kernel) Lock(ctx context.Context, id string) (func(), error) { return k.m.locks.Lock(ctx, id) }

func (k kernel) Go(fn func()) {
	k.m.reaps.Add(1)
	go func() {
		defer k.m.reaps.Done()
		fn()
	}()
}

func (k kernel) Peek(id string) (hook.Sandbox, bool) {
	inst := k.m.liveInstance(id)
	if inst == nil || inst.isPaused() {
		return nil, false
	}
	return &Running{m: k.m, inst: inst}, true
}

// busy is what the Busiers say keeps live inst busy; errs, why some could
// not tell.
func (m *Manager) busy(ctx context.Context, inst *instance) (reasons []string, errs []error) {
	for _, h := range m.hooks {
		if b, ok := h.(hook.Busier); ok {
			r, err := b.Busy(ctx, &Running{m: m, inst: inst})
			reasons = append(reasons, r...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return reasons, errs
}

// attachHooks gives every Attacher the kernel.
func (m *Manager) attachHooks() {
	for _, h := range m.hooks {
		if a, ok := h.(hook.Attacher); ok {
			a.Attach(kernel{m})
		}
	}
}

// suspendedHooks runs every Halter's Suspended for sandbox id.
func (m *Manager) suspendedHooks(id string) {
	for _, h := range m.hooks {
		if s, ok := h.(hook.Halter); ok {
			s.Suspended(id)
		}
	}
}

// importHooks has the Importers make suspended sandbox rec's files here
// when they are elsewhere: the handle of what the first one made, or nil.
func (m *Manager) importHooks(ctx context.Context, rec *store.Sandbox, spec backend.Spec) (*backend.Handle, error) {
	for _, h := range m.hooks {
		if i, ok := h.(hook.Importer); ok {
			if made, err := i.Import(ctx, rec, spec); made != nil || err != nil {
				return made, err
			}
		}
	}
	return nil, nil
}

// removedHooks runs every Remover's Removed for a torn-down sandbox.
func (m *Manager) removedHooks(ctx context.Context, id string) {
	for _, h := range m.hooks {
		if r, ok := h.(hook.Remover); ok {
			if err := r.Removed(ctx, id); err != nil {
				m.log.Warn("remove what a hook kept of a deleted sandbox", attrSandbox, id, "hook", h.Name(), "error", err)
			}
		}
	}
}
