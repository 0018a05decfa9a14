// Package quota keeps the workspaces' quotas and tells what their
// sandboxes use: a hook of the lifecycle kernel (hook.Admitter,
// hook.Ticker), and the service the API's workspace routes and template
// build steps ask.
//
// A create, and a resume or start of a sandbox that does not run, is
// admitted against its workspace's quota under a lock of that workspace
// held until the sandbox counts (in the store, running or resuming), so
// that two racing cannot both take the last place. What counts as running
// is every sandbox that holds its memory and CPUs (store.HoldsResources);
// disk counts every sandbox, since a suspended or stopped one keeps its
// files. Sandbox time is counted at the kernel's ticks, every UsageEvery,
// for the same sandboxes as running, towards the UTC day's sandbox-hours.
package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/keylock"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// UsageEvery is how often sandbox time is counted.
const UsageEvery = 30 * time.Second

// Store is what the keeper reads and writes: the sandboxes' records, the
// workspaces' and their sandbox time.
type Store interface {
	ListSandboxes(ctx context.Context) ([]*store.Sandbox, error)
	store.Workspaces
}

// Config wires a Keeper.
type Config struct {
	Store Store
	// Node names this daemon among the nodes sharing Store: it counts the
	// time of its own sandboxes ("": a single box).
	Node string
	// Now tells the time (time.Now when nil): the kernel's clock.
	Now    func() time.Time
	Logger *slog.Logger
}

// Keeper keeps the quotas. It is safe for concurrent use.
type Keeper struct {
	store Store
	node  string
	now   func() time.Time
	log   *slog.Logger
	// locks hold a workspace from an admission until what it admitted
	// counts.
	locks keylock.Locks
	// buildSteps are the template build steps in flight (see buildstep.go).
	buildSteps buildHolds

	mu sync.Mutex
	// lastCount is when sandbox time was last counted (see Tick).
	lastCount time.Time
}

// New returns a Keeper.
func New(cfg Config) *Keeper {
	k := &Keeper{store: cfg.Store, node: cfg.Node, now: cfg.Now, log: cfg.Logger}
	if k.now == nil {
		k.now = time.Now
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	return k
}

// Name names the hook.
func (k *Keeper) Name() string { return "quota" }

// Usage is what a workspace's sandboxes use, beside its quota. Its
// template build steps in flight count as running sandboxes (see
// AdmitBuildStep).
type Usage struct {
	Workspace string
	Quota     store.Quota
	// Sandboxes are those running (or paused, or on their way).
	Sandboxes int
	MemoryMB  int64
	CPUs      float64
	// DiskMB is the disk limits of all of its sandboxes.
	DiskMB int64
	// SandboxHours is the sandbox time of Day (UTC) so far.
	SandboxHours float64
	Day          string
}

// dayOf is the UTC day t counts towards.
func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Usage returns workspace ws's usage and quota; ErrNotFound if there is
// no such workspace.
func (k *Keeper) Usage(ctx context.Context, ws string) (Usage, error) {
	w, err := k.store.GetWorkspace(ctx, ws)
	if err != nil {
		return Usage{}, err
	}
	recs, err := k.store.ListSandboxes(ctx)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Workspace: ws, Quota: w.Quota, Day: dayOf(k.now())}
	for _, rec := range recs {
		if rec.Workspace != ws {
			continue
		}
		u.DiskMB += rec.DiskMB
		if store.HoldsResources(rec.State) {
			u.Sandboxes++
			u.MemoryMB += rec.MemoryMB
			u.CPUs += rec.CPUs
		}
	}
	used, err := k.store.SandboxTime(ctx, ws, u.Day)
	if err != nil {
		return Usage{}, err
	}
	u.SandboxHours = used.Hours()
	k.buildSteps.addTo(&u) // template build steps in flight (buildstep.go)
	return u, nil
}

// Workspaces lists the workspaces.
func (k *Keeper) Workspaces(ctx context.Context) ([]store.Workspace, error) {
	recs, err := k.store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.Workspace, 0, len(recs))
	for _, r := range recs {
		out = append(out, store.Workspace{Name: r.Name, Quota: r.Quota, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// SetQuota sets workspace ws's quota (making the workspace if it is
// not yet). A zero field is no bound.
func (k *Keeper) SetQuota(ctx context.Context, ws string, q store.Quota) error {
	if err := workspace.Check(ws); err != nil {
		return err
	}
	if q.Sandboxes < 0 || q.MemoryMB < 0 || q.CPUs < 0 || q.DiskMB < 0 || q.SandboxHours < 0 {
		return errdefs.InvalidArgument("a quota's figures must be 0 (no bound) or more")
	}
	if err := k.store.SetQuota(ctx, ws, q, k.now().UTC()); err != nil {
		return err
	}
	k.log.Info("workspace quota set", "workspace", ws, "quota", fmt.Sprintf("%+v", q))
	return nil
}

// Admit checks that sandbox a fits its workspace's quota, and holds the
// workspace's lock until release is called, once the sandbox counts (or
// its create or resume failed): the kernel's admission (hook.Admitter).
// A workspace's first sandbox records the workspace.
func (k *Keeper) Admit(ctx context.Context, n hook.Admission) (release func(), err error) {
	w, err := k.store.GetWorkspace(ctx, n.Workspace)
	if errors.Is(err, errdefs.ErrNotFound) { // its first sandbox: a write only then
		w, err = k.store.EnsureWorkspace(ctx, n.Workspace, k.now().UTC())
	}
	if err != nil {
		return nil, err
	}
	if w.Quota == (store.Quota{}) {
		return func() {}, nil
	}
	unlock, err := k.locks.Lock(ctx, n.Workspace)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	u, err := k.Usage(ctx, n.Workspace)
	if err != nil {
		return nil, err
	}
	q := u.Quota
	over := func(what string, format string, args ...any) error {
		return errdefs.ResourceExhausted("workspace %s is at its quota of %s: %s", n.Workspace, what, fmt.Sprintf(format, args...))
	}
	switch {
	case q.Sandboxes > 0 && !n.Growth && u.Sandboxes+1 > q.Sandboxes:
		return nil, over("running sandboxes", "%d of %d run; stop, suspend or delete one first", u.Sandboxes, q.Sandboxes)
	case q.MemoryMB > 0 && u.MemoryMB+n.MemoryMB > q.MemoryMB:
		return nil, over("memory", "%d MiB of %d MiB in use, and this sandbox asks for %d MiB", u.MemoryMB, q.MemoryMB, n.MemoryMB)
	case q.CPUs > 0 && u.CPUs+n.CPUs > q.CPUs+1e-9:
		return nil, over("CPUs", "%g of %g in use, and this sandbox asks for %g", u.CPUs, q.CPUs, n.CPUs)
	case q.DiskMB > 0 && u.DiskMB+n.DiskMB > q.DiskMB:
		return nil, over("disk", "%d MiB of %d MiB given to its sandboxes, and this sandbox asks for %d MiB", u.DiskMB, q.DiskMB, n.DiskMB)
	case q.SandboxHours > 0 && !n.Growth && u.SandboxHours >= q.SandboxHours:
		return nil, over("sandbox-hours", "%.2f of %g hours used on %s (UTC); it starts again at midnight UTC", u.SandboxHours, q.SandboxHours, u.Day)
	}
	return unlock, nil
}

// Tick counts sandbox time, every UsageEvery: it adds the time since the
// last count to the workspaces of the sandboxes that hold their resources
// (hook.Ticker).
func (k *Keeper) Tick(ctx context.Context, now time.Time) {
	k.mu.Lock()
	last := k.lastCount
	if !last.IsZero() && now.Sub(last) < UsageEvery {
		k.mu.Unlock()
		return
	}
	k.lastCount = now
	k.mu.Unlock()
	if last.IsZero() {
		return // the first count starts the clock
	}
	recs, err := k.store.ListSandboxes(ctx)
	if err != nil {
		k.log.Error("list sandboxes for their time", "error", err)
		return
	}
	used := map[string]time.Duration{}
	for _, rec := range recs {
		if rec.Node == k.node && store.HoldsResources(rec.State) { // each node counts its own
			used[rec.Workspace] += min(now.Sub(last), now.Sub(rec.CreatedAt))
		}
	}
	for ws, d := range used {
		if d <= 0 {
			continue
		}
		if err := k.store.AddSandboxTime(ctx, ws, dayOf(now), d); err != nil {
			k.log.Error("count sandbox time", "workspace", ws, "error", err)
		}
	}
}
