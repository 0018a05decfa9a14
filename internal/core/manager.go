// Package core is the lifecycle kernel, the Manager: it owns every
// sandbox's life (create, recover after a restart, pause, suspend, resume,
// stop, delete, the timers, the warm pool), every change of state going
// through one transition under the sandbox's lock. Features attach to its
// steps as hooks (internal/core/hook), each in a package of its own
// (quota, network, secretenv, processes). What is done in a sandbox is
// the services' beside it (internal/core/exec, files, toolrun, template):
// they take a running sandbox from Acquire and reach its agent through
// the Running it hands them, never around the core.
package core

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/keylock"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Defaults and bounds of a create call.
const (
	DefaultTemplate    = "host"
	DefaultCPUs        = 1.0
	DefaultMemoryMB    = 512
	DefaultPids        = 256
	DefaultDiskMB      = 2048
	DefaultIdleTimeout = 300 * time.Second
	DefaultMaxLifetime = 30 * 24 * time.Hour

	minMemoryMB    = 32
	maxMemoryMB    = 1 << 20
	minPids        = 16
	maxPids        = 1 << 16
	minDiskMB      = 64      // ext4's own structures need a few MiB
	maxDiskMB      = 1 << 20 // 1 TiB
	maxIdleTimeout = 30 * 24 * time.Hour
	maxMaxLifetime = 365 * 24 * time.Hour
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
	hooks []hook.Hook

	mu      sync.Mutex
	live    map[string]*instance // sandboxes with a running container
	reaping map[string]bool      // idle sandboxes being suspended or deleted
	reaps   sync.WaitGroup       // of those, for Close
	// teardowns are deleted sandboxes' teardowns (see teardown.go).
	teardowns *teardowns
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
		teardowns: newTeardowns(),
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
	m.attachHooks()
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
		Pools: m.pools(), Deleting: m.deleting()}
}

// CreateOptions are the caller's wishes for a new sandbox; zero values mean
// the defaults.
type CreateOptions struct {
	Template    string
	Runtime     string
	CPUs        float64
	MemoryMB    int64
	Pids        int64
	DiskMB      int64
	Env         map[string]string
	Metadata    map[string]string
	IdleTimeout time.Duration
	// IdleAction is what the idle timeout does: store.IdleSuspend (the
	// default), store.IdleStop or store.IdleDelete.
	IdleAction string
	// Key makes a create a get-or-create (see Create).
	Key string
	// MaxLifetime is how long the sandbox lives at most, running or
	// suspended: it is deleted then.
	MaxLifetime time.Duration
	// Files are placed in the workspace before the first command: paths in
	// it (or absolute under it) to their text, owned by the sandbox user.
	Files map[string]string
	// FilesTar is a tar (gzipped or not) unpacked into the workspace
	// before Files are placed, owned by the sandbox user.
	FilesTar []byte
	// FromSnapshot, instead of Template, names the snapshot to start from.
	FromSnapshot string
	// Volumes are mounted into the sandbox (the volumes hook,
	// internal/core/volume, checks and binds them).
	Volumes []store.VolumeMount
	// Network is its network policy; nil: the daemon's default (the
	// network hook's Prepare fills it in; without that hook, mode full).
	Network *netpolicy.Policy
	// NetworkCeiling is the least isolated network mode its caller may
	// give a sandbox ("": any, the administrator's). Every create path
	// (REST, MCP, E2B, fork) passes its caller's, and Create applies it
	// (checkNetwork): a policy above it is refused, and with none asked
	// for, a default above it is lowered to it.
	NetworkCeiling netpolicy.Mode

	// Workspace is the workspace that owns it (default:
	// workspace.Default); User, when not "", the product's user it is
	// made for, whose personal secrets its commands get.
	Workspace string
	User      string
	// Secrets, when not nil, narrows its workspace's secrets to these
	// names.
	Secrets []string

	files map[string]backend.File // Files and FilesTar, checked by withDefaults
	// admitted ends the create's admission (see admit).
	admitted func()
}

// withDefaults fills in defaults and checks every field, reporting all
// problems at once.
func (o CreateOptions) withDefaults() (CreateOptions, error) {
	if o.FromSnapshot != "" {
		if o.Template != "" && o.Template != o.FromSnapshot {
			return o, errdefs.InvalidArgument("give template or from_snapshot, not both")
		}
		o.Template = o.FromSnapshot
	}
	if o.Template == "" {
		o.Template = DefaultTemplate
	}
	if o.Workspace == "" {
		o.Workspace = workspace.Default
	}
	if o.CPUs == 0 {
		o.CPUs = DefaultCPUs
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = DefaultMemoryMB
	}
	if o.Pids == 0 {
		o.Pids = DefaultPids
	}
	if o.DiskMB == 0 {
		o.DiskMB = DefaultDiskMB
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.IdleAction == "" {
		o.IdleAction = store.IdleSuspend
	}
	if o.MaxLifetime == 0 {
		o.MaxLifetime = DefaultMaxLifetime
	}
	var errs []error
	if n := float64(runtime.NumCPU()); o.CPUs < 0.01 || o.CPUs > n {
		errs = append(errs, fmt.Errorf("cpus must be between 0.01 and %g (this host's CPUs), got %g", n, o.CPUs))
	}
	if o.MemoryMB < minMemoryMB || o.MemoryMB > maxMemoryMB {
		errs = append(errs, fmt.Errorf("memory_mb must be between %d and %d, got %d", minMemoryMB, maxMemoryMB, o.MemoryMB))
	}
	if o.Pids < minPids || o.Pids > maxPids {
		errs = append(errs, fmt.Errorf("pids must be between %d and %d, got %d", minPids, maxPids, o.Pids))
	}
	if o.DiskMB < minDiskMB || o.DiskMB > maxDiskMB {
		errs = append(errs, fmt.Errorf("disk_mb must be between %d and %d, got %d", minDiskMB, maxDiskMB, o.DiskMB))
	}
	if len(o.Key) > 256 || strings.ContainsFunc(o.Key, unicode.IsControl) {
		errs = append(errs, fmt.Errorf("key must be at most 256 characters, none of them control characters"))
	}
	if err := checkIdleAction(o.IdleAction); err != nil {
		errs = append(errs, err)
	}
	if err := workspace.Check(o.Workspace); err != nil {
		errs = append(errs, err)
	}
	if o.User != "" {
		if err := workspace.CheckUser(o.User); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range o.Secrets {
		if !rootfs.ValidEnvName(name) {
			errs = append(errs, fmt.Errorf("secret name %q is not a valid variable name", name))
		}
	}
	if o.IdleTimeout < time.Second || o.IdleTimeout > maxIdleTimeout {
		errs = append(errs, fmt.Errorf("idle_timeout_s must be between 1 and %d, got %d", int(maxIdleTimeout.Seconds()), int(o.IdleTimeout.Seconds())))
	}
	if err := checkMaxLifetime(o.MaxLifetime); err != nil {
		errs = append(errs, err)
	}
	var err error
	if o.files, err = rootfs.WorkspaceFiles(o.Files, o.FilesTar); err != nil {
		errs = append(errs, err)
	}
	for k := range o.Env {
		if !rootfs.ValidEnvName(k) {
			errs = append(errs, fmt.Errorf("env name %q is not a valid variable name", k))
		}
	}
	if len(errs) > 0 {
		return o, errdefs.InvalidArgument("%v", errors.Join(errs...))
	}
	return o, nil
}

// checkIdleAction checks an idle action a call gives.
func checkIdleAction(a string) error {
	if a != store.IdleSuspend && a != store.IdleStop && a != store.IdleDelete {
		return fmt.Errorf("idle_action must be %s, %s or %s, got %q", store.IdleSuspend, store.IdleStop, store.IdleDelete, a)
	}
	return nil
}

// checkMaxLifetime checks a max lifetime a call gives.
func checkMaxLifetime(d time.Duration) error {
	if d < time.Second || d > maxMaxLifetime {
		return fmt.Errorf("max_lifetime_s must be between 1 and %d, got %d", int(maxMaxLifetime.Seconds()), int(d.Seconds()))
	}
	return nil
}

// spec is what sandbox id is made from. Its environment is not in it: the
// sandbox's env is given to each command (see instance.env), so that a
// sandbox made ahead of time for the pool serves any.
func (m *Manager) spec(id, rootDir string, binds []backend.Bind, opts CreateOptions) backend.Spec {
	return backend.Spec{
		ID:       id,
		Hostname: id,
		RootDir:  rootDir,
		Binds:    append(slices.Clone(binds), m.hookBinds(&opts)...),
		Files:    identityFiles(id),
		Limits: backend.Limits{
			CPUs:        opts.CPUs,
			MemoryBytes: opts.MemoryMB << 20,
			Pids:        opts.Pids,
			DiskBytes:   opts.DiskMB << 20,
		},
	}
}

// Attribute keys for logs.
const (
	attrSandbox = "sandbox_id"
	attrBackend = "backend"
)

// NewID returns a random sandbox ID: 12 characters of [a-z0-9], valid as a
// hostname, a path element and a container name.
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// identityFiles are the files that name a sandbox, and its resolver: the
// daemon's, at its gateway (see sandboxnet), never the host's. (Its
// accounts come with its template.)
func identityFiles(id string) map[string]backend.File {
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n", id)
	resolv := "nameserver " + sandboxnet.RouterAddr.String() + "\n"
	return map[string]backend.File{
		"/etc/hosts":       {Data: []byte(hosts), Mode: 0o644},
		"/etc/hostname":    {Data: []byte(id + "\n"), Mode: 0o644},
		"/etc/resolv.conf": {Data: []byte(resolv), Mode: 0o644},
	}
}
