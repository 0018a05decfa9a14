package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Quotas per workspace. A create, and a resume or start of a sandbox that
// does not run, is admitted against its workspace's quota under a lock of
// that workspace held until the sandbox counts (in the store, running or
// resuming), so that two racing cannot both take the last place.
// What counts as running is every sandbox that holds its memory and CPUs
// (running, paused, and on their way in or out); disk counts every
// sandbox, since a suspended or stopped one keeps its files. Sandbox time
// is counted by the timers, every usageEvery, for the same sandboxes as
// running, towards the UTC day's sandbox-hours.

// usageEvery is how often sandbox time is counted.
const usageEvery = 30 * time.Second

// Quota bounds what a workspace's sandboxes use together (see
// store.Quota, its record). A zero field is no bound.
type Quota struct {
	Sandboxes    int
	MemoryMB     int64
	CPUs         float64
	DiskMB       int64
	SandboxHours float64
}

// Workspace is a workspace and its quota.
type Workspace struct {
	Name      string
	Quota     Quota
	CreatedAt time.Time
}

// Usage is what a workspace's sandboxes use, beside its quota. Its
// template build steps in flight count as running sandboxes (see
// AdmitBuildStep).
type Usage struct {
	Workspace string
	Quota     Quota
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

// holdsResources says whether a sandbox in state s counts as running.
func holdsResources(s store.State) bool {
	switch s {
	case store.Creating, store.Running, store.Paused, store.Resuming, store.Suspending, store.Stopping:
		return true
	}
	return false
}

// dayOf is the UTC day t counts towards.
func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Usage returns workspace ws's usage and quota; ErrNotFound if there is
// no such workspace.
func (m *Manager) Usage(ctx context.Context, ws string) (Usage, error) {
	w, err := m.store.GetWorkspace(ctx, ws)
	if err != nil {
		return Usage{}, err
	}
	recs, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Workspace: ws, Quota: Quota(w.Quota), Day: dayOf(m.clock.Now())}
	for _, rec := range recs {
		if rec.Workspace != ws {
			continue
		}
		u.DiskMB += rec.DiskMB
		if holdsResources(rec.State) {
			u.Sandboxes++
			u.MemoryMB += rec.MemoryMB
			u.CPUs += rec.CPUs
		}
	}
	used, err := m.store.SandboxTime(ctx, ws, u.Day)
	if err != nil {
		return Usage{}, err
	}
	u.SandboxHours = used.Hours()
	m.buildSteps.addTo(&u) // template build steps in flight (buildquota.go)
	return u, nil
}

// Workspaces lists the workspaces.
func (m *Manager) Workspaces(ctx context.Context) ([]Workspace, error) {
	recs, err := m.store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Workspace, 0, len(recs))
	for _, r := range recs {
		out = append(out, Workspace{Name: r.Name, Quota: Quota(r.Quota), CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// SetQuota sets workspace ws's quota (making the workspace if it is
// not yet). A zero field is no bound.
func (m *Manager) SetQuota(ctx context.Context, ws string, q Quota) error {
	if err := workspace.Check(ws); err != nil {
		return err
	}
	if q.Sandboxes < 0 || q.MemoryMB < 0 || q.CPUs < 0 || q.DiskMB < 0 || q.SandboxHours < 0 {
		return errdefs.InvalidArgument("a quota's figures must be 0 (no bound) or more")
	}
	if err := m.store.SetQuota(ctx, ws, store.Quota(q), m.clock.Now().UTC()); err != nil {
		return err
	}
	m.log.Info("workspace quota set", "workspace", ws, "quota", fmt.Sprintf("%+v", q))
	return nil
}

// need is what a sandbox adds to its workspace's usage when it starts to
// run: a new one its disk too, a resumed one not (its files were kept).
type need struct {
	workspace string
	memoryMB  int64
	cpus      float64
	diskMB    int64
}

// needOf is what a create of opts (with its defaults) adds.
func needOf(opts CreateOptions) need {
	return need{workspace: opts.Workspace, memoryMB: opts.MemoryMB, cpus: opts.CPUs, diskMB: opts.DiskMB}
}

// admit checks that a sandbox needing n fits its workspace's quota, and
// holds the workspace's lock until release is called, once the sandbox
// counts (or its create or resume failed).
func (m *Manager) admit(ctx context.Context, n need) (release func(), err error) {
	w, err := m.store.GetWorkspace(ctx, n.workspace)
	if errors.Is(err, errdefs.ErrNotFound) { // its first sandbox: a write only then
		w, err = m.store.EnsureWorkspace(ctx, n.workspace, m.clock.Now().UTC())
	}
	if err != nil {
		return nil, err
	}
	if w.Quota == (store.Quota{}) {
		return func() {}, nil
	}
	unlock, err := m.locks.lock(ctx, "quota:"+n.workspace)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	u, err := m.Usage(ctx, n.workspace)
	if err != nil {
		return nil, err
	}
	q := u.Quota
	over := func(what string, format string, args ...any) error {
		return errdefs.ResourceExhausted("workspace %s is at its quota of %s: %s", n.workspace, what, fmt.Sprintf(format, args...))
	}
	switch {
	case q.Sandboxes > 0 && u.Sandboxes+1 > q.Sandboxes:
		return nil, over("running sandboxes", "%d of %d run; stop, suspend or delete one first", u.Sandboxes, q.Sandboxes)
	case q.MemoryMB > 0 && u.MemoryMB+n.memoryMB > q.MemoryMB:
		return nil, over("memory", "%d MiB of %d MiB in use, and this sandbox asks for %d MiB", u.MemoryMB, q.MemoryMB, n.memoryMB)
	case q.CPUs > 0 && u.CPUs+n.cpus > q.CPUs+1e-9:
		return nil, over("CPUs", "%g of %g in use, and this sandbox asks for %g", u.CPUs, q.CPUs, n.cpus)
	case q.DiskMB > 0 && u.DiskMB+n.diskMB > q.DiskMB:
		return nil, over("disk", "%d MiB of %d MiB given to its sandboxes, and this sandbox asks for %d MiB", u.DiskMB, q.DiskMB, n.diskMB)
	case q.SandboxHours > 0 && u.SandboxHours >= q.SandboxHours:
		return nil, over("sandbox-hours", "%.2f of %g hours used on %s (UTC); it starts again at midnight UTC", u.SandboxHours, q.SandboxHours, u.Day)
	}
	return unlock, nil
}

// countSandboxTime adds the time since the last count to the workspaces
// of the sandboxes that hold their resources (see usageEvery).
func (m *Manager) countSandboxTime(ctx context.Context, now time.Time) {
	last := m.lastUsage
	m.lastUsage = now
	if last.IsZero() {
		return
	}
	recs, err := m.held(ctx) // each node counts its own
	if err != nil {
		m.log.Error("list sandboxes for their time", "error", err)
		return
	}
	used := map[string]time.Duration{}
	for _, rec := range recs {
		if holdsResources(rec.State) {
			used[rec.Workspace] += min(now.Sub(last), now.Sub(rec.CreatedAt))
		}
	}
	for ws, d := range used {
		if d <= 0 {
			continue
		}
		if err := m.store.AddSandboxTime(ctx, ws, dayOf(now), d); err != nil {
			m.log.Error("count sandbox time", "workspace", ws, "error", err)
		}
	}
}
