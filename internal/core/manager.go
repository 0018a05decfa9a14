// Package core is the lifecycle kernel, the Manager: it owns every
// sandbox's life (create, recover after a restart, pause, suspend, resume,
// stop, delete, the timers, the warm pool), every change of state going
// through one transition under the sandbox's lock. Features attach to its
// steps as hooks (internal/core/hook), each in a package of its own
// (quota, network, secretenv, processes, volume, memory, move). What is
// done in a sandbox is the services' beside it (internal/core/exec, files,
// toolrun, template): they take a running sandbox from Acquire and reach
// its agent through the Running it hands them, never around the core.
package core

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/backlog"
	"github.com/hutchdev/hutch/internal/base/keylock"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Config wires a Manager.
type Config struct {
	Store store.Store
	// Backends are the runtimes sandboxes are made with, each under its
	// Name; a create that names none gets Default.
	Backends []backend.Backend
	Default  string
	// DefaultReason says why Default is the default, for the health report.
	DefaultReason string
	// Unusable names the backends found unusable at start, with why: no
	// sandbox is created with them, but theirs are still recovered and
	// deleted.
	Unusable map[string]string
	// Pending names those of them that are being set up (a runtime binary
	// being built): a create that asks for one answers unavailable, and
	// probes it again, until it is usable.
	Pending map[string]bool
	// Templates are what sandboxes are made from. The core observes the
	// store (see templateChanged): a template that changes or goes takes
	// its pool sandboxes with it.
	Templates *rootfs.Store
	Logger    *slog.Logger
	// ReapInterval is how often idle sandboxes are looked for.
	ReapInterval time.Duration
	// Pools are the warm pools to keep full (see pool.go).
	Pools []PoolSpec
	// Clock tells the time of timers and records (the real one when nil).
	Clock Clock
	// Node names this daemon among the nodes sharing Store (scale-out,
	// internal/cluster): it holds, recovers and times only the sandboxes
	// of its name. "": a single box.
	Node string
	// Hooks are the features attached to the kernel's steps, in the order
	// they run (see hooks.go).
	Hooks []hook.Hook
}

// Manager owns the sandboxes.
type Manager struct {
	store     store.Store
	runtimes  *backend.Set
	templates *rootfs.Store
	// unobserve ends the core's observation of templates (Close).
	unobserve func()
	log       *slog.Logger
	reapEvery time.Duration
	clock     Clock
	node      string

	pool *warmPool
	// locks serialise each sandbox's changes of state: every change
	// (create, pause, thaw, suspend, stop, resume, snapshot, delete, a lost
	// container) happens under the sandbox's lock, so that the backend sees
	// one call at a time for a sandbox, as its contract asks.
	locks keylock.Locks
	hooks hook.List

	mu      sync.Mutex
	live    map[string]*instance // sandboxes with a running container
	reaping map[string]bool      // idle sandboxes being suspended or deleted
	reaps   sync.WaitGroup       // of those, for Close
	// teardowns are deleted sandboxes' teardowns (see teardown.go).
	teardowns *backlog.Queue
	// lastExpiry is when tick last looked for ended lifetimes (Run's
	// goroutine only).
	lastExpiry time.Time
}

// New returns a Manager that has picked up the sandboxes an earlier daemon
// process left (see recoverSandboxes). Call Run for the timers, and Close.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	m := &Manager{
		node:      cfg.Node,
		store:     cfg.Store,
		templates: cfg.Templates,
		log:       cfg.Logger,
		reapEvery: cfg.ReapInterval,
		clock:     cfg.Clock,
		live:      map[string]*instance{},
		reaping:   map[string]bool{},
		pool:      newWarmPool(cfg.Pools, cfg.Default),
		teardowns: backlog.New(maxTeardowns, maxBacklog),
		hooks:     cfg.Hooks,
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.clock == nil {
		m.clock = realClock{}
	}
	if m.reapEvery == 0 {
		m.reapEvery = time.Second
	}
	var err error
	m.runtimes, err = backend.NewSet(backend.SetConfig{Backends: cfg.Backends, Default: cfg.Default, DefaultReason: cfg.DefaultReason,
		Unusable: cfg.Unusable, Pending: cfg.Pending, Logger: m.log})
	if err != nil {
		return nil, err
	}
	m.hooks.Attach(kernel{m})
	if err := m.recoverSandboxes(ctx); err != nil {
		return nil, fmt.Errorf("recover sandboxes: %w", err)
	}
	m.unobserve = m.templates.Observe(m.templateChanged)
	return m, nil
}

// Health is how the core is: its runtimes and its warm pools.
type Health struct {
	// Default is the runtime a create that names none gets, and
	// DefaultReason why.
	Default       string
	DefaultReason string
	// Backends are what every backend's Probe found; Usable names those
	// sandboxes are made with now.
	Backends []backend.Health
	Usable   []string
	// Pools say how full each warm pool is.
	Pools []PoolStatus
	// Deleting is how many deleted sandboxes' teardowns are under way or
	// waiting for a slot.
	Deleting int
}

// Health reports how the core is.
func (m *Manager) Health(ctx context.Context) Health {
	def, why := m.runtimes.Default()
	return Health{Default: def, DefaultReason: why, Backends: m.runtimes.Probe(ctx, m.clock.Now()), Usable: m.runtimes.Usable(),
		Pools: m.pools(), Deleting: m.teardowns.Pending()}
}

// spec is what sandbox id is made from: opts's spec, with the binds of
// its template and of the hooks.
func (m *Manager) spec(id, rootDir string, binds []backend.Bind, opts create.Options) backend.Spec {
	return opts.Spec(id, rootDir, append(slices.Clone(binds), m.hooks.Binds(&opts)...))
}

// Attribute keys for logs.
const (
	attrSandbox = "sandbox_id"
	attrBackend = "backend"
)
