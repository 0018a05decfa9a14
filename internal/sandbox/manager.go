// Package sandbox is the Manager: it owns every sandbox's lifecycle (create,
// recover after a restart, idle timeout, delete) and is the one place the API
// reaches sandboxes through. Exec and files go to the sandbox's agent.
package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/download"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/template"
	"github.com/hutchdev/hutch/internal/tools"
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
	Unusable  map[string]string
	Templates *template.Store
	// PackageCache keeps the packages template builds download.
	PackageCache string
	Logger       *slog.Logger
	// ReapInterval is how often idle sandboxes are looked for.
	ReapInterval time.Duration
	// Pools are the warm pools to keep full (see pool.go).
	Pools []PoolSpec
	// VolumeDir holds the volumes' files.
	VolumeDir string
	// Downloads signs download URLs (sandbox_download_url), which start
	// with PublicURL, the daemon's address as callers reach it. Nil: the
	// tool says downloads are off.
	Downloads *download.Signer
	PublicURL string
	// ToolMode is the sandbox mode of tool calls that name none
	// (tools.ModeAll when ""); HostToolsDir, where calls run on the host
	// in the other modes, which are refused without it (hosttools.go).
	ToolMode     string
	HostToolsDir string
}

// Manager owns the sandboxes.
type Manager struct {
	store     store.Store
	backends  map[string]backend.Backend
	def       string
	defReason string
	unusable  map[string]string
	templates *template.Store
	// packageCache keeps the packages template builds download.
	packageCache string
	log          *slog.Logger
	reapEvery    time.Duration
	volumeDir    string
	downloads    *download.Signer
	publicURL    string
	toolMode     string
	hostToolsDir string

	pool *warmPool

	mu        sync.Mutex
	live      map[string]*instance // sandboxes with a running container
	wakeLocks map[string]*wakeLock // sandboxes being suspended or resumed
	reaping   map[string]bool      // idle sandboxes being suspended or deleted
	reaps     sync.WaitGroup       // of those, for Close
}

// New returns a Manager. Call Recover before serving and Run for the timers.
func New(cfg Config) (*Manager, error) {
	m := &Manager{
		store:        cfg.Store,
		backends:     map[string]backend.Backend{},
		def:          cfg.Default,
		defReason:    cfg.DefaultReason,
		unusable:     cfg.Unusable,
		templates:    cfg.Templates,
		packageCache: cfg.PackageCache,
		log:          cfg.Logger,
		reapEvery:    cfg.ReapInterval,
		volumeDir:    cfg.VolumeDir,
		downloads:    cfg.Downloads,
		publicURL:    strings.TrimSuffix(cfg.PublicURL, "/"),
		toolMode:     cmp.Or(cfg.ToolMode, tools.ModeAll),
		hostToolsDir: cfg.HostToolsDir,
		live:         map[string]*instance{},
		wakeLocks:    map[string]*wakeLock{},
		reaping:      map[string]bool{},
		pool:         newWarmPool(cfg.Pools, cfg.Default),
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.reapEvery == 0 {
		m.reapEvery = time.Second
	}
	for _, b := range cfg.Backends {
		m.backends[b.Name()] = b
	}
	if _, ok := m.backends[m.def]; !ok {
		return nil, fmt.Errorf("default runtime %q is not one of the configured backends", m.def)
	}
	return m, nil
}

// DefaultRuntime is the backend a create that names none gets, and why.
func (m *Manager) DefaultRuntime() (name, reason string) { return m.def, m.defReason }

// backendFor is the backend a create asks for by name ("": the default).
func (m *Manager) backendFor(name string) (backend.Backend, error) {
	if name == "" {
		name = m.def
	}
	be, ok := m.backends[name]
	if !ok {
		return nil, errdefs.InvalidArgument("runtime must be one of %s, got %q",
			strings.Join(slices.Sorted(maps.Keys(m.backends)), ", "), name)
	}
	if why, bad := m.unusable[name]; bad {
		return nil, errdefs.FailedPrecondition("runtime %s is not usable on this host: %s", name, why)
	}
	return be, nil
}

// Health reports what every backend's Probe found.
func (m *Manager) Health(ctx context.Context) []backend.Health {
	var out []backend.Health
	for _, name := range slices.Sorted(maps.Keys(m.backends)) {
		out = append(out, m.backends[name].Probe(ctx))
	}
	return out
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
	// Key makes a create a get-or-create (see Open).
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
	// Volumes are mounted into the sandbox (see volumes.go).
	Volumes []store.VolumeMount

	workspace map[string]backend.File // Files and FilesTar, checked by withDefaults
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
	if o.IdleTimeout < time.Second || o.IdleTimeout > maxIdleTimeout {
		errs = append(errs, fmt.Errorf("idle_timeout_s must be between 1 and %d, got %d", int(maxIdleTimeout.Seconds()), int(o.IdleTimeout.Seconds())))
	}
	if err := checkMaxLifetime(o.MaxLifetime); err != nil {
		errs = append(errs, err)
	}
	var err error
	if o.workspace, err = workspaceFiles(o.Files, o.FilesTar); err != nil {
		errs = append(errs, err)
	}
	for k := range o.Env {
		if !template.ValidEnvName(k) {
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

// Create makes and starts a sandbox and returns it once its agent answers.
// On failure nothing of it remains.
func (m *Manager) Create(ctx context.Context, opts CreateOptions) (sb *store.Sandbox, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	tmpl, err := m.templates.Get(opts.Template)
	if err != nil {
		return nil, err
	}
	if opts.FromSnapshot != "" {
		if info, err := m.templates.Info(opts.FromSnapshot); err != nil || info.Source != template.SourceSnapshot {
			return nil, errdefs.InvalidArgument("%s is not a snapshot (hutch template ls shows their source)", opts.FromSnapshot)
		}
	}
	opts.Env = withEnv(tmpl.Env, opts.Env) // a Hutchfile's ENV, under the create's
	be, err := m.backendFor(opts.Runtime)
	if err != nil {
		return nil, err
	}
	if opts.Volumes, err = m.volumeMounts(ctx, opts.Volumes); err != nil {
		return nil, err
	}
	// A pool's sandboxes run already: files and volumes go in before the
	// start, and a snapshot's memory is the start.
	if len(opts.workspace) == 0 && len(opts.Volumes) == 0 && tmpl.Memory == "" {
		if sb, ok := m.takePooled(opts, be.Name()); ok {
			if sb.version == tmpl.Version {
				return m.adopt(ctx, sb, opts)
			}
			go m.destroyPooled(sb) // made before a rebuild
		}
	}
	now := time.Now().UTC()
	rec := &store.Sandbox{
		ID: newID(), Template: tmpl.Name, TemplateVersion: tmpl.Version, Backend: be.Name(), State: store.StateCreating,
		CPUs: opts.CPUs, MemoryMB: opts.MemoryMB, Pids: opts.Pids, DiskMB: opts.DiskMB, IdleTimeout: opts.IdleTimeout, IdleAction: opts.IdleAction, Key: opts.Key,
		Env: opts.Env, Metadata: opts.Metadata, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(opts.MaxLifetime),
		Volumes: opts.Volumes,
	}
	if err := m.store.CreateSandbox(ctx, rec); err != nil {
		return nil, err
	}
	log := m.log.With(attrSandbox, rec.ID, attrBackend, be.Name())
	defer func() {
		if err == nil {
			return
		}
		// The backend rolled back its part; drop the record too.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := m.store.DeleteSandbox(cctx, rec.ID); derr != nil {
			log.Error("drop record of failed sandbox", "error", derr)
		}
	}()

	spec := m.spec(rec.ID, tmpl.RootDir, tmpl.Binds, opts)
	maps.Copy(spec.Files, opts.workspace)
	if tmpl.MemoryRuntime == be.Name() {
		spec.Restore = tmpl.Memory // a snapshot's processes go on
	}
	h, err := be.Create(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", rec.ID, err)
	}
	rec.Handle = h.State
	rec.State = store.StateRunning
	rec.UpdatedAt = time.Now().UTC()
	inst := newInstance(rec, be, h)
	if err := m.store.UpdateSandbox(ctx, rec); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := be.Destroy(cctx, h); derr != nil {
			log.Error("roll back sandbox", "error", derr)
		}
		return nil, err
	}
	m.mu.Lock()
	m.live[rec.ID] = inst
	m.mu.Unlock()
	log.Info("sandbox created", "template", rec.Template, "duration", time.Since(now))
	return copyRecord(rec), nil
}

// spec is what sandbox id is made from. Its environment is not in it: the
// sandbox's env is given to each command (see instance.env), so that a
// sandbox made ahead of time for the pool serves any.
func (m *Manager) spec(id, rootDir string, binds []backend.Bind, opts CreateOptions) backend.Spec {
	return backend.Spec{
		ID:       id,
		Hostname: id,
		RootDir:  rootDir,
		Binds:    append(slices.Clone(binds), m.volumeBinds(opts.Volumes)...),
		Files:    identityFiles(id),
		Limits: backend.Limits{
			CPUs:        opts.CPUs,
			MemoryBytes: opts.MemoryMB << 20,
			Pids:        opts.Pids,
			DiskBytes:   opts.DiskMB << 20,
		},
	}
}

// adopt makes a pool sandbox the caller's: one insert into the store.
func (m *Manager) adopt(ctx context.Context, sb pooled, opts CreateOptions) (*store.Sandbox, error) {
	now := time.Now().UTC()
	rec := &store.Sandbox{
		ID: sb.id, Template: opts.Template, TemplateVersion: sb.version, Backend: sb.be.Name(), State: store.StateRunning,
		CPUs: opts.CPUs, MemoryMB: opts.MemoryMB, Pids: opts.Pids, DiskMB: opts.DiskMB, IdleTimeout: opts.IdleTimeout, IdleAction: opts.IdleAction, Key: opts.Key,
		Env: opts.Env, Metadata: opts.Metadata, Handle: sb.handle.State, CreatedAt: now, UpdatedAt: now,
		ExpiresAt: now.Add(opts.MaxLifetime),
	}
	if err := m.store.CreateSandbox(ctx, rec); err != nil {
		go m.destroyPooled(sb)
		return nil, err
	}
	inst := sb.inst
	inst.mu.Lock()
	inst.idleTimeout, inst.env, inst.lastActive = rec.IdleTimeout, rec.Env, time.Now()
	inst.mu.Unlock()
	m.mu.Lock()
	m.live[rec.ID] = inst
	m.mu.Unlock()
	m.log.Info("sandbox created", attrSandbox, rec.ID, attrBackend, rec.Backend, "template", rec.Template, "from_pool", true)
	return copyRecord(rec), nil
}

// Get returns a sandbox's record.
func (m *Manager) Get(ctx context.Context, id string) (*store.Sandbox, error) {
	return m.store.GetSandbox(ctx, id)
}

// List returns every sandbox's record.
func (m *Manager) List(ctx context.Context) ([]*store.Sandbox, error) {
	return m.store.ListSandboxes(ctx)
}

// Delete destroys a sandbox and forgets it. A sandbox whose destruction
// fails stays listed in state error with the reason.
func (m *Manager) Delete(ctx context.Context, id string) error {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	m.mu.Lock()
	inst := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()

	h := backend.Handle{ID: rec.ID, Backend: rec.Backend, State: rec.Handle}
	be, ok := m.backends[rec.Backend]
	if ok {
		if inst != nil {
			inst.close()
		}
		// Destruction must finish even if the caller goes away.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := be.Destroy(dctx, h); err != nil {
			m.setState(dctx, rec, store.StateError, "delete failed: "+err.Error())
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	if err := m.store.DeleteSandbox(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	m.log.Info("sandbox deleted", attrSandbox, id)
	return nil
}

// setState records a state change; failures are logged, as the caller is
// already reporting something else.
func (m *Manager) setState(ctx context.Context, rec *store.Sandbox, state, reason string) {
	rec.State, rec.StateReason, rec.UpdatedAt = state, reason, time.Now().UTC()
	if err := m.store.UpdateSandbox(ctx, rec); err != nil {
		m.log.Error("record sandbox state", attrSandbox, rec.ID, "state", state, "error", err)
	}
}

// Stats reads what a running sandbox uses. Reading it is not activity: a
// dashboard that polls stats does not keep a sandbox from its idle timeout.
func (m *Manager) Stats(ctx context.Context, id string) (backend.Stats, error) {
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	if inst == nil {
		return backend.Stats{}, m.notLive(ctx, id) // a suspended sandbox is not woken to be measured
	}
	return inst.backend.Stats(ctx, inst.handle)
}

// instance returns the live sandbox id, marking it active for the idle timer.
func (m *Manager) instance(ctx context.Context, id string) (*instance, error) {
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	if inst != nil {
		inst.touch()
		// A paused sandbox wakes for any call that needs it.
		if err := m.thaw(ctx, inst, "woken by a call"); err != nil {
			return nil, err
		}
		return inst, nil
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State != store.StateSuspended && rec.State != store.StateSuspending && rec.State != store.StateResuming {
		return nil, notRunning(rec)
	}
	// A suspended one too, once (one being suspended once that is done):
	// calls that come meanwhile wait for it.
	unlock := m.lockWake(id)
	defer unlock()
	m.mu.Lock()
	inst = m.live[id]
	m.mu.Unlock()
	if inst == nil {
		if rec, err = m.store.GetSandbox(ctx, id); err != nil {
			return nil, err
		}
		if rec.State != store.StateSuspended {
			return nil, notRunning(rec)
		}
		if inst, err = m.resume(ctx, rec, "woken by a call"); err != nil {
			return nil, err
		}
	}
	inst.touch()
	return inst, nil
}

// notRunning is the error of a call to a sandbox that is not running.
func notRunning(rec *store.Sandbox) error {
	if rec.State == store.StateStopped {
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
// the sandbox has stopped (under gVisor, a memory or fork bomb takes the
// whole sandbox), so it is marked error and cleaned up, and the call says so.
// When the agent answers, err stands.
func (m *Manager) lostAgent(ctx context.Context, inst *instance, err error) error {
	inst.agent.CloseIdleConnections()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	herr := inst.agent.Health(hctx)
	cancel()
	if herr == nil {
		return err
	}
	const reason = "its agent stopped while a command ran (a gVisor sandbox stops like this when it exhausts its memory or process limit)"
	m.mu.Lock()
	if m.live[inst.id] != inst {
		m.mu.Unlock()
		return err // suspended or deleted meanwhile: not lost
	}
	delete(m.live, inst.id)
	m.mu.Unlock()
	inst.close()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rec, gerr := m.store.GetSandbox(cctx, inst.id); gerr == nil {
		m.setState(cctx, rec, store.StateError, reason)
	}
	if derr := inst.backend.Destroy(cctx, inst.handle); derr != nil {
		m.log.Error("clean up stopped sandbox", attrSandbox, inst.id, "error", derr)
	}
	m.log.Warn("sandbox stopped", attrSandbox, inst.id, "reason", reason)
	return errdefs.Unavailable("sandbox %s stopped: %s", inst.id, reason)
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// Attribute keys for logs.
const (
	attrSandbox = "sandbox_id"
	attrBackend = "backend"
)

// newID returns a random sandbox ID: 12 characters of [a-z0-9], valid as a
// hostname, a path element and a container name.
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func copyRecord(r *store.Sandbox) *store.Sandbox {
	c := *r
	c.Env = maps.Clone(r.Env)
	c.Metadata = maps.Clone(r.Metadata)
	return &c
}

// identityFiles are the files that name a sandbox. (Its accounts come with
// its template.)
func identityFiles(id string) map[string]backend.File {
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n", id)
	return map[string]backend.File{
		"/etc/hosts":    {Data: []byte(hosts), Mode: 0o644},
		"/etc/hostname": {Data: []byte(id + "\n"), Mode: 0o644},
	}
}
