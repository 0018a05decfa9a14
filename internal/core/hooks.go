package core

import (
	"context"
	"time"
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
