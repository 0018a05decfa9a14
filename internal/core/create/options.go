// Package create is what a caller asks a new sandbox to be (Options):
// the lifecycle kernel's create takes it, and the hooks attached to the
// create's first step (hook.Preparer) check it and fill it in. Its
// defaults and bounds are here.
package create

import (
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
	"unicode"

	"github.com/hutchdev/hutch/internal/base/errdefs"
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

	maxIdleTimeout = 30 * 24 * time.Hour

	minMemoryMB    = 32
	maxMemoryMB    = 1 << 20
	minPids        = 16
	maxPids        = 1 << 16
	minDiskMB      = 64      // ext4's own structures need a few MiB
	maxDiskMB      = 1 << 20 // 1 TiB
	maxMaxLifetime = 365 * 24 * time.Hour
)

// Options are a caller's wishes for a new sandbox; zero values mean the
// defaults.
type Options struct {
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
	// Checkpoints is when checkpoints are taken: "" on request only,
	// store.CheckpointsPerToolCall before each tool call that changes
	// something too.
	Checkpoints string
	// OnSuspend and OnResume are commands run in the sandbox before it is
	// suspended or stopped, and once it runs again ("": none).
	OnSuspend, OnResume string
	// Key makes a create a get-or-create (see core.Manager.Create).
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
	// internal/core/volume, checks them and binds them).
	Volumes []store.VolumeMount
	// Network is its network policy; nil: the daemon's default (the
	// network hook's Prepare fills it in; without that hook, mode full).
	Network *netpolicy.Policy
	// NetworkCeiling is the least isolated network mode its caller may
	// give a sandbox ("": any, the administrator's). Every create path
	// (REST, MCP, E2B, fork) passes its caller's, and the network hook
	// applies it: a policy above it is refused, and with none asked for,
	// a default above it is lowered to it.
	NetworkCeiling netpolicy.Mode

	// Workspace is the workspace that owns it (default:
	// workspace.Default); User, when not "", the product's user it is
	// made for, whose personal secrets its commands get.
	Workspace string
	User      string
	// Secrets, when not nil, narrows its workspace's secrets to these
	// names.
	Secrets []string
}

// WithDefaults fills in defaults and checks every field, reporting all
// problems at once; files are Files and FilesTar as the sandbox's writable
// layer has them (see rootfs.WorkspaceFiles).
func (o Options) WithDefaults() (_ Options, files map[string]backend.File, err error) {
	if o.FromSnapshot != "" {
		if o.Template != "" && o.Template != o.FromSnapshot {
			return o, nil, errdefs.InvalidArgument("give template or from_snapshot, not both")
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
	if len(o.OnSuspend) > 4096 || len(o.OnResume) > 4096 {
		errs = append(errs, fmt.Errorf("on_suspend and on_resume are at most 4096 bytes each"))
	}
	if o.Checkpoints != "" && o.Checkpoints != store.CheckpointsPerToolCall {
		errs = append(errs, fmt.Errorf("checkpoints must be %q or empty (on request only), got %q", store.CheckpointsPerToolCall, o.Checkpoints))
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
	if err := checkIdleTimeout(o.IdleTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := checkMaxLifetime(o.MaxLifetime); err != nil {
		errs = append(errs, err)
	}
	if files, err = rootfs.WorkspaceFiles(o.Files, o.FilesTar); err != nil {
		errs = append(errs, err)
	}
	for k := range o.Env {
		if !rootfs.ValidEnvName(k) {
			errs = append(errs, fmt.Errorf("env name %q is not a valid variable name", k))
		}
	}
	if len(errs) > 0 {
		return o, nil, errdefs.InvalidArgument("%v", errors.Join(errs...))
	}
	return o, files, nil
}

// CheckKeepalive checks the timers a keepalive gives (core.Manager's
// Keepalive): a new idle timeout, idle action or max lifetime, each zero
// when left as it is, not all of them.
func CheckKeepalive(timeout time.Duration, action string, lifetime time.Duration) error {
	var err error
	switch {
	case timeout == 0 && lifetime == 0:
		return errdefs.InvalidArgument("give idle_timeout_s, max_lifetime_s or both")
	case timeout != 0:
		err = checkIdleTimeout(timeout)
	}
	if err == nil && lifetime != 0 {
		err = checkMaxLifetime(lifetime)
	}
	if err == nil && action != "" {
		err = checkIdleAction(action)
	}
	if err != nil {
		return errdefs.InvalidArgument("%v", err)
	}
	return nil
}

// checkIdleTimeout checks an idle timeout a call gives.
func checkIdleTimeout(d time.Duration) error {
	if d < time.Second || d > maxIdleTimeout {
		return fmt.Errorf("idle_timeout_s must be between 1 and %d, got %d", int(maxIdleTimeout.Seconds()), int(d.Seconds()))
	}
	return nil
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

// Spec is what sandbox id is made from, with these options: its root, the
// host directories bound in it, the files that name it, its limits. Its
// environment is not in it: the sandbox's env is given to each command, so
// that a sandbox made ahead of time for a warm pool serves any.
func (o Options) Spec(id, rootDir string, binds []backend.Bind) backend.Spec {
	return backend.Spec{
		ID:       id,
		Hostname: id,
		RootDir:  rootDir,
		Binds:    binds,
		Files:    identityFiles(id),
		Limits: backend.Limits{
			CPUs:        o.CPUs,
			MemoryBytes: o.MemoryMB << 20,
			Pids:        o.Pids,
			DiskBytes:   o.DiskMB << 20,
		},
	}
}

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
