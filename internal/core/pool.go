package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The warm pool: per template and runtime, sandboxes made ahead of time, so
// that a create is answered by handing one over. A pool sandbox has the
// default shape (limits, idle timeout) and no environment of its own: a
// create asking for another shape makes a sandbox as usual, and one with
// env gets it at every exec (see instance.env), so env does not keep it
// from the pool. Pool sandboxes are not in the store: nobody sees them
// until one is taken, a daemon that stops destroys them, and one that
// crashed leaves them to the next start's Recover, which destroys every
// sandbox no record knows.

// PoolSpec asks for Size ready sandboxes of Template on Runtime.
type PoolSpec struct {
	Template string
	Runtime  string // "": the default runtime
	Size     int
}

// PoolStatus is how full one pool is.
type PoolStatus struct {
	Template string
	Runtime  string
	Size     int
	Ready    int
}

type poolKey struct{ template, runtime string }

// pooled is a ready sandbox, with its agent connection warm.
type pooled struct {
	id      string
	version string // of its template
	be      backend.Backend
	handle  backend.Handle
	inst    *instance
}

// poolRefillDelay is how long a pool waits to replace a sandbox taken:
// making one takes a core for tens of milliseconds, which the sandbox just
// handed over should have for its first commands.
const poolRefillDelay = 100 * time.Millisecond

// poolRetry is how long a pool whose last fill failed waits to try again.
const poolRetry = 30 * time.Second

// warmPool holds the pools; the Manager fills and drains it.
type warmPool struct {
	mu      sync.Mutex
	size    map[poolKey]int
	ready   map[poolKey][]pooled
	filling map[poolKey]int
	failed  map[poolKey]time.Time // the last failed fill
	closed  bool
	wg      sync.WaitGroup // fills under way
	kick    chan struct{}  // asks Run to fill now
}

func newWarmPool(specs []PoolSpec, def string) *warmPool {
	p := &warmPool{
		size: map[poolKey]int{}, ready: map[poolKey][]pooled{}, filling: map[poolKey]int{},
		failed: map[poolKey]time.Time{}, kick: make(chan struct{}, 1),
	}
	for _, s := range specs {
		if s.Size > 0 {
			p.size[poolKey{s.Template, cmp.Or(s.Runtime, def)}] = s.Size
		}
	}
	return p
}

// wake asks for a fill soon.
func (p *warmPool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// fillPools starts making the sandboxes the pools lack.
func (m *Manager) fillPools(ctx context.Context) {
	p := m.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, size := range p.size {
		if p.closed || time.Since(p.failed[key]) < poolRetry {
			continue
		}
		for n := size - len(p.ready[key]) - p.filling[key]; n > 0; n-- {
			p.filling[key]++
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				m.fillOne(ctx, key)
			}()
		}
	}
}

// fillOne makes one pool sandbox for key and puts it in the pool, unless
// the pool was closed or the template changed meanwhile.
func (m *Manager) fillOne(ctx context.Context, key poolKey) {
	p := m.pool
	sb, err := m.makePooled(ctx, key)
	p.mu.Lock()
	p.filling[key]--
	keep := err == nil && !p.closed && m.isCurrent(key.template, sb.version)
	if keep {
		p.ready[key] = append(p.ready[key], sb)
		// One that ends by itself meanwhile is replaced: the pool's
		// counts say what can be handed over.
		m.watch(sb.inst, func(reason string) { m.poolLost(key, sb, reason) })
	}
	if err != nil {
		p.failed[key] = time.Now()
	}
	p.mu.Unlock()
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		// The template is not built (yet): a build wakes the pool.
	case err != nil:
		m.log.Warn("warm pool: make a sandbox", "template", key.template, attrBackend, key.runtime, "error", err, "retry_in", poolRetry)
	case !keep:
		m.destroyPooled(sb)
	}
}

// makePooled creates a sandbox of the default shape for the pool.
func (m *Manager) makePooled(ctx context.Context, key poolKey) (pooled, error) {
	tmpl, err := m.templates.Get(key.template)
	if err != nil {
		return pooled{}, err
	}
	be, err := m.runtimes.For(ctx, key.runtime, m.clock.Now())
	if err != nil {
		return pooled{}, err
	}
	opts, _, _ := create.Options{}.WithDefaults()
	id := create.NewID()
	h, err := be.Create(ctx, m.spec(id, tmpl.RootDir, tmpl.Binds, opts))
	if err != nil {
		return pooled{}, err
	}
	sb := pooled{id: id, version: tmpl.Version, be: be, handle: h, inst: newInstance(&store.Sandbox{ID: id, IdleTimeout: opts.IdleTimeout}, be, h, m.clock)}
	// Handed over with its network served: until then it reaches nothing.
	if err := m.startHooks(ctx, sb.inst, netpolicy.Policy{Mode: netpolicy.None}); err != nil {
		m.destroyPooled(sb)
		return pooled{}, err
	}
	// A first command warms what the caller's first would pay for: the
	// connection to the agent, and the agent's spare process starters.
	if err := warmUp(ctx, sb.inst.agent); err != nil {
		m.destroyPooled(sb)
		return pooled{}, fmt.Errorf("warm up sandbox %s: %w", id, err)
	}
	return sb, nil
}

// isCurrent reports whether version is the current one of template.
func (m *Manager) isCurrent(template, version string) bool {
	t, err := m.templates.Get(template)
	return err == nil && t.Version == version
}

// Outcomes of a create at its warm pool (hook.Step's Pool).
const (
	poolHit  = "hit"
	poolMiss = "miss" // a pool serves its template and runtime but had none ready
)

// takePooled hands over a ready sandbox for opts (already defaulted), if
// the pool has one of that template, runtime and shape; pool says how it
// went (poolHit, poolMiss, or "" when no pool serves opts).
func (m *Manager) takePooled(opts create.Options, runtime string) (sb pooled, pool string) {
	def, _, _ := create.Options{}.WithDefaults()
	if opts.CPUs != def.CPUs || opts.MemoryMB != def.MemoryMB || opts.Pids != def.Pids || opts.DiskMB != def.DiskMB {
		return pooled{}, ""
	}
	p := m.pool
	key := poolKey{opts.Template, runtime}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.size[key] == 0 {
		return pooled{}, ""
	}
	if len(p.ready[key]) == 0 {
		return pooled{}, poolMiss
	}
	sb = p.ready[key][0]
	p.ready[key] = p.ready[key][1:]
	sb.inst.whenEnded(nil) // the taker's now: its watch tells the taker (see Manager.watch)
	time.AfterFunc(poolRefillDelay, p.wake)
	return sb, poolHit
}

// poolLost replaces a ready sandbox whose container ended by itself.
func (m *Manager) poolLost(key poolKey, sb pooled, reason string) {
	p := m.pool
	p.mu.Lock()
	i := slices.IndexFunc(p.ready[key], func(r pooled) bool { return r.id == sb.id })
	if i >= 0 {
		p.ready[key] = slices.Delete(p.ready[key], i, i+1)
	}
	p.mu.Unlock()
	if i < 0 {
		return // taken or destroyed meanwhile
	}
	m.log.Warn("warm pool: a ready sandbox stopped; replacing it", attrSandbox, sb.id, "reason", reason)
	m.destroyPooled(sb)
	p.wake()
}

// flushPool destroys the ready sandboxes of template that are not of its
// current version (all of them when it is gone), and fills the pool anew.
func (m *Manager) flushPool(template string) {
	p := m.pool
	p.mu.Lock()
	var stale []pooled
	for key, list := range p.ready {
		if key.template != template {
			continue
		}
		kept := list[:0]
		for _, sb := range list {
			if m.isCurrent(template, sb.version) {
				kept = append(kept, sb)
			} else {
				stale = append(stale, sb)
			}
		}
		p.ready[key] = kept
	}
	// A pool whose fill failed (its template was not built yet, say)
	// tries again at once, not poolRetry later.
	for key := range p.size {
		if key.template == template {
			delete(p.failed, key)
		}
	}
	p.mu.Unlock()
	for _, sb := range stale {
		m.destroyPooled(sb)
	}
	p.wake()
}

// templateChanged is the core's observer of its template store (see
// rootfs.Store.Observe), called when template name's current version
// changed or the template went: the pool's sandboxes of the version before
// go and new ones come, and the versions no sandbox uses any more (the one
// before, a snapshot's memory image as big as the sandbox's memory) are
// removed. It runs on the goroutine of the build, snapshot or removal, and
// may run for two templates at once.
func (m *Manager) templateChanged(name string) {
	m.flushPool(name)
	// The observer has no context: the change is made, and its caller's
	// may end any time now.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.pruneTemplates(ctx); err != nil {
		m.log.Warn("prune old template versions", "template", name, "error", err)
	}
}

// pruneTemplates removes old template versions no sandbox uses, neither
// the store's nor the pool's.
func (m *Manager) pruneTemplates(ctx context.Context) error {
	list, err := m.held(ctx)
	if err != nil {
		return err
	}
	used := m.poolVersions()
	for _, sb := range list {
		used[sb.Template+"/"+sb.TemplateVersion] = true
	}
	return m.templates.Prune(func(name, version string) bool { return used[name+"/"+version] })
}

// poolVersions are the template versions pool sandboxes use, as
// "name/version", for Prune.
func (m *Manager) poolVersions() map[string]bool {
	p := m.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	used := map[string]bool{}
	for key, list := range p.ready {
		for _, sb := range list {
			used[key.template+"/"+sb.version] = true
		}
	}
	return used
}

// pools reports how full each pool is.
func (m *Manager) pools() []PoolStatus {
	p := m.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PoolStatus
	for key, size := range p.size {
		out = append(out, PoolStatus{Template: key.template, Runtime: key.runtime, Size: size, Ready: len(p.ready[key])})
	}
	slices.SortFunc(out, func(a, b PoolStatus) int {
		if a.Template != b.Template {
			return cmp.Compare(a.Template, b.Template)
		}
		return cmp.Compare(a.Runtime, b.Runtime)
	})
	return out
}

// drainPools stops filling and destroys every pool sandbox, in parallel.
func (m *Manager) drainPools() {
	p := m.pool
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait() // a fill that ends now destroys what it made
	p.mu.Lock()
	var all []pooled
	for key, list := range p.ready {
		all = append(all, list...)
		delete(p.ready, key)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, sb := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.destroyPooled(sb)
		}()
	}
	wg.Wait()
}

func (m *Manager) destroyPooled(sb pooled) {
	sb.inst.unwatch()
	sb.inst.close(true)
	sb.inst.stopHooks()
	m.hooks.Deleted(sb.id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sb.be.Destroy(ctx, sb.handle); err != nil {
		m.log.Error("warm pool: destroy a sandbox", attrSandbox, sb.id, "error", err)
	}
}

// warmUp runs true in a new sandbox through its agent.
func warmUp(ctx context.Context, agent *agentclient.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := agent.Run(ctx, agentclient.Command{Argv: []string{"true"}, Cwd: "/", User: rootfs.UserName})
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("true exited %d in a new sandbox", st.Code)
	}
	return err
}
