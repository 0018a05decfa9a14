package core

import (
	"context"
	"maps"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The kernel's steps run the hooks attached to them (Config.Hooks, a
// hook.List): each step runs those that implement its interface, in that
// order.

// startHooks runs every Starter's Start for inst, whose network policy is
// policy, keeping what stops them in inst (see instance.stopHooks).
func (m *Manager) startHooks(ctx context.Context, inst *instance, policy netpolicy.Policy) error {
	stop, err := m.hooks.Start(ctx, hook.Live{ID: inst.id, Backend: inst.backend, Handle: inst.handle, Agent: inst.agent, Network: policy})
	if err != nil {
		return err
	}
	inst.addStop(stop)
	return nil
}

// observed tells the Observers that step name of sandbox rec, begun at
// began, has ended with err.
func (m *Manager) observed(name string, rec *store.Sandbox, began time.Time, err error) {
	m.hooks.Observed(hook.Step{Name: name, Sandbox: rec.ID, Workspace: rec.Workspace, Runtime: rec.Backend, Took: time.Since(began), Err: err})
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
	out := maps.Clone(inst.env)
	if out == nil {
		out = map[string]string{}
	}
	c := hook.Command{Sandbox: inst.id, Workspace: owner.workspace, User: user, Secrets: owner.names}
	if err := m.hooks.CommandEnv(ctx, c, out); err != nil {
		return nil, err
	}
	maps.Copy(out, env)
	return out, nil
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
