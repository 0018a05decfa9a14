package hook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// List is the hooks attached to the kernel (core.Config.Hooks). Each of
// its methods is a step: it runs the hooks that implement the step's
// interface, in the list's order.
type List []Hook

// Attach gives every Attacher the kernel.
func (l List) Attach(k Kernel) {
	for _, h := range l {
		if a, ok := h.(Attacher); ok {
			a.Attach(k)
		}
	}
}

// Admit runs every Admitter's Admit for a; release ends them all. A
// refusal releases those admitted before it.
func (l List) Admit(ctx context.Context, a Admission) (release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for _, h := range l {
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

// Tick runs every Ticker's Tick.
func (l List) Tick(ctx context.Context, now time.Time) {
	for _, h := range l {
		if t, ok := h.(Ticker); ok {
			t.Tick(ctx, now)
		}
	}
}

// Prepare runs every Preparer's Prepare on o, which they may fill in.
func (l List) Prepare(ctx context.Context, o *create.Options) error {
	for _, h := range l {
		if p, ok := h.(Preparer); ok {
			if err := p.Prepare(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// Start runs every Starter's Start for lv; stop stops them all, the last
// started first. A failure, named by its hook, stops those started
// before it.
func (l List) Start(ctx context.Context, lv Live) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	for _, h := range l {
		s, ok := h.(Starter)
		if !ok {
			continue
		}
		sctx, span := spans.Start(ctx, "hook.start "+h.Name())
		one, err := s.Start(sctx, lv)
		spans.End(span, err)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", h.Name(), err)
		}
		if one != nil {
			stops = append(stops, one)
		}
	}
	return stop, nil
}

// Claimed tells every Claimer that a warm pool's sandbox is a caller's.
func (l List) Claimed(ctx context.Context, lv Live) {
	for _, h := range l {
		if c, ok := h.(Claimer); ok {
			c.Claimed(ctx, lv)
		}
	}
}

// Deleted tells every Deleter that sandbox id is gone.
func (l List) Deleted(id string) {
	for _, h := range l {
		if d, ok := h.(Deleter); ok {
			d.Deleted(id)
		}
	}
}

// CommandEnv has every Enver set its variables in env, the environment
// of command c being built.
func (l List) CommandEnv(ctx context.Context, c Command, env map[string]string) error {
	for _, h := range l {
		if e, ok := h.(Enver); ok {
			if err := e.CommandEnv(ctx, c, env); err != nil {
				return err
			}
		}
	}
	return nil
}

// Binds are the binds every Binder adds to a sandbox made with o.
func (l List) Binds(o *create.Options) []backend.Bind {
	var binds []backend.Bind
	for _, h := range l {
		if b, ok := h.(Binder); ok {
			binds = append(binds, b.Binds(o)...)
		}
	}
	return binds
}

// Suspending runs every Suspender's Suspending for sb.
func (l List) Suspending(ctx context.Context, sb Sandbox) {
	for _, h := range l {
		if s, ok := h.(Suspender); ok {
			s.Suspending(ctx, sb)
		}
	}
}

// Suspended runs every Halter's Suspended for sandbox id.
func (l List) Suspended(id string) {
	for _, h := range l {
		if s, ok := h.(Halter); ok {
			s.Suspended(id)
		}
	}
}

// Import has the Importers make suspended sandbox rec's files here when
// they are elsewhere: the handle of what the first one made, or nil.
func (l List) Import(ctx context.Context, rec *store.Sandbox, spec backend.Spec) (*backend.Handle, error) {
	for _, h := range l {
		if i, ok := h.(Importer); ok {
			if made, err := i.Import(ctx, rec, spec); made != nil || err != nil {
				return made, err
			}
		}
	}
	return nil, nil
}

// Resumed runs every Resumer's Resumed for sb.
func (l List) Resumed(ctx context.Context, sb Sandbox) {
	for _, h := range l {
		if r, ok := h.(Resumer); ok {
			r.Resumed(ctx, sb)
		}
	}
}

// Removed runs every Remover's Removed for a torn-down sandbox; their
// failures, each named by its hook, are joined.
func (l List) Removed(ctx context.Context, id string) error {
	var errs []error
	for _, h := range l {
		if r, ok := h.(Remover); ok {
			if err := r.Removed(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", h.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Busy is what the Busiers say keeps sb busy; errs, why some could not
// tell.
func (l List) Busy(ctx context.Context, sb Sandbox) (reasons []string, errs []error) {
	for _, h := range l {
		if b, ok := h.(Busier); ok {
			r, err := b.Busy(ctx, sb)
			reasons = append(reasons, r...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return reasons, errs
}

// CountHits has every Counter add to hits, sandbox id's limit hits.
func (l List) CountHits(id string, hits *backend.LimitHits) {
	for _, h := range l {
		if c, ok := h.(Counter); ok {
			c.CountHits(id, hits)
		}
	}
}

// Observed runs every Observer's Observed.
func (l List) Observed(s Step) {
	for _, h := range l {
		if o, ok := h.(Observer); ok {
			o.Observed(s)
		}
	}
}

// Changes says whether any hook is a Changer: the kernel reads the record
// of a change only for them.
func (l List) Changes() bool {
	for _, h := range l {
		if _, ok := h.(Changer); ok {
			return true
		}
	}
	return false
}

// Changed runs every Changer's Changed.
func (l List) Changed(c Change) {
	for _, h := range l {
		if ch, ok := h.(Changer); ok {
			ch.Changed(c)
		}
	}
}
