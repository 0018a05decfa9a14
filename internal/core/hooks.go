package core

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Hooks: the features attached to the kernel's steps, each in a package
// of its own (HashiCorp Nomad's allocrunner hooks are the model). A hook
// implements the interfaces of the steps it attaches to; Config.Hooks
// lists them, and each step runs its hooks in that order. Adding a
// capability adds a hook, not methods on the Manager.

// A Hook is a feature attached to the kernel. Name names it in logs.
type Hook interface {
	Name() string
}

// Admission is a sandbox about to hold resources: a create (with its
// disk), or a resume or start of one whose files were kept (without).
type Admission struct {
	Workspace string
	MemoryMB  int64
	CPUs      float64
	DiskMB    int64
}

// An Admitter admits sandboxes before they start to hold resources.
// release is called once the sandbox counts (its record says it runs or
// resumes) or its start failed; an error refuses the start, and is the
// caller's answer.
type Admitter interface {
	Hook
	Admit(ctx context.Context, a Admission) (release func(), err error)
}

// A Ticker runs with the kernel's timers, at each tick (see Config's
// ReapInterval), at the kernel clock's time.
type Ticker interface {
	Hook
	Tick(ctx context.Context, now time.Time)
}

// A Preparer checks, and may fill in, a create's options before anything
// is made for it: that the secrets it names exist, its network policy
// (the default, the caller's ceiling). An error refuses the create.
type Preparer interface {
	Hook
	Prepare(ctx context.Context, opts *CreateOptions) error
}

// Live is a sandbox whose container runs, as its hooks see it.
type Live struct {
	ID      string
	Backend backend.Backend
	Handle  backend.Handle
	// Network is its network policy; a warm pool's sandbox, no one's yet,
	// has mode none until it is claimed.
	Network netpolicy.Policy
}

// A Starter attaches to a sandbox's container each time it starts: a
// create, a resume, a recovery after a restart, a warm pool's make. stop
// is called when the container stops (a suspend, a stop, a delete, its
// loss). An error fails a create; a resume or a recovery goes on without
// what failed, and says so in the log.
type Starter interface {
	Hook
	Start(ctx context.Context, l Live) (stop func(), err error)
}

// A Claimer learns that a warm pool's sandbox is a caller's now, with the
// caller's network policy.
type Claimer interface {
	Hook
	Claimed(ctx context.Context, l Live)
}

// A Deleter forgets a sandbox that is gone (deleted, or a warm pool's
// that no one took).
type Deleter interface {
	Hook
	Deleted(id string)
}

// Command is a command about to start in a sandbox, as hooks see it.
type Command struct {
	Sandbox string
	// Workspace owns the sandbox; "" for a warm pool's, no one's yet.
	Workspace string
	// User is the product's user the command runs for ("": none).
	User string
	// Secrets are the names the sandbox's secrets were narrowed to at
	// its create; nil: all of them.
	Secrets []string
}

// An Enver adds to a command's environment: given env, the sandbox's and
// what the Envers before it added, it returns env with its own additions;
// the command's own env goes over the result. Never log what it returns.
type Enver interface {
	Hook
	CommandEnv(ctx context.Context, c Command, env map[string]string) (map[string]string, error)
}

// A Binder mounts host directories into every sandbox it makes.
type Binder interface {
	Hook
	Binds() []backend.Bind
}

// prepare runs every Preparer's Prepare on opts.
func (m *Manager) prepare(ctx context.Context, opts *CreateOptions) error {
	for _, h := range m.hooks {
		if p, ok := h.(Preparer); ok {
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
	l := Live{ID: inst.id, Backend: inst.backend, Handle: inst.handle, Network: policy}
	for _, h := range m.hooks {
		s, ok := h.(Starter)
		if !ok {
			continue
		}
		stop, err := s.Start(ctx, l)
		if err != nil {
			inst.stopHooks()
			return fmt.Errorf("%s of sandbox %s: %w", h.Name(), inst.id, err)
		}
		inst.addStop(stop)
	}
	return nil
}

// claimed tells every Claimer that a warm pool's sandbox is a caller's.
func (m *Manager) claimed(ctx context.Context, inst *instance, policy netpolicy.Policy) {
	l := Live{ID: inst.id, Backend: inst.backend, Handle: inst.handle, Network: policy}
	for _, h := range m.hooks {
		if c, ok := h.(Claimer); ok {
			c.Claimed(ctx, l)
		}
	}
}

// deleted tells every Deleter that sandbox id is gone.
func (m *Manager) deleted(id string) {
	for _, h := range m.hooks {
		if d, ok := h.(Deleter); ok {
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
	c := Command{Sandbox: inst.id, Workspace: owner.workspace, User: user, Secrets: owner.names}
	out := maps.Clone(inst.env)
	if out == nil {
		out = map[string]string{}
	}
	for _, h := range m.hooks {
		if e, ok := h.(Enver); ok {
			var err error
			if out, err = e.CommandEnv(ctx, c, out); err != nil {
				return nil, err
			}
		}
	}
	maps.Copy(out, env)
	return out, nil
}

// hookBinds are the binds every Binder adds.
func (m *Manager) hookBinds() []backend.Bind {
	var binds []backend.Bind
	for _, h := range m.hooks {
		if b, ok := h.(Binder); ok {
			binds = append(binds, b.Binds()...)
		}
	}
	return binds
}

// admit runs every Admitter's Admit for a; release ends them all. A
// refusal releases those admitted before it.
func (m *Manager) admit(ctx context.Context, a Admission) (release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, h := range m.hooks {
		ad, ok := h.(Admitter)
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
		if t, ok := h.(Ticker); ok {
			t.Tick(ctx, now)
		}
	}
}
