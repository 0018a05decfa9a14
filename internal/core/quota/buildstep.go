package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Template build steps and the quotas. A build step runs in a sandbox of
// its own that the template service makes directly on the build backend
// (not recorded in the store), so the store's records do not count it. A
// workspace's step is admitted here instead, as a create is: under the
// workspace's quota lock, against what its sandboxes and its other steps
// in flight use; it then counts in memory (Usage included) until its
// release, so that sandboxes and build steps together stay within the
// quota. A step gets what the quota leaves, up to what it would get
// without one, and is refused below a floor it could not build with.
// Steps in flight count on the node that runs them only.

// The floors of a build step: less than this left of a quota refuses it
// (or the quota itself, when it is smaller).
const (
	minStepMemoryMB = 256
	minStepCPUs     = 0.25
	minStepDiskMB   = 256
)

// StepLimits are the limits of a template build step's sandbox.
type StepLimits struct {
	MemoryMB int64
	CPUs     float64
	DiskMB   int64
}

// buildHolds are the build steps in flight, by workspace.
type buildHolds struct {
	mu sync.Mutex
	ws map[string][]*hook.Admission
}

func (h *buildHolds) add(n *hook.Admission) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ws == nil {
		h.ws = map[string][]*hook.Admission{}
	}
	h.ws[n.Workspace] = append(h.ws[n.Workspace], n)
}

func (h *buildHolds) remove(n *hook.Admission) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.ws[n.Workspace]
	for i, x := range list {
		if x == n {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.ws, n.Workspace)
		return
	}
	h.ws[n.Workspace] = list
}

// addTo adds the steps in flight of u's workspace to u.
func (h *buildHolds) addTo(u *Usage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.ws[u.Workspace] {
		u.Sandboxes++
		u.MemoryMB += n.MemoryMB
		u.CPUs += n.CPUs
		u.DiskMB += n.DiskMB
	}
}

// WorkspaceQuota is workspace ws's quota; none (all zero) for a workspace
// not recorded yet.
func (k *Keeper) WorkspaceQuota(ctx context.Context, ws string) (store.Quota, error) {
	w, err := k.store.GetWorkspace(ctx, ws)
	if errors.Is(err, errdefs.ErrNotFound) {
		return store.Quota{}, nil
	}
	if err != nil {
		return store.Quota{}, err
	}
	return w.Quota, nil
}

// AdmitBuildStep admits a template build step of workspace ws, which
// without a quota runs with want. It returns the limits the step runs
// with, each at most want and what ws's quota leaves, and release, to be
// called once the step's sandbox is gone; until then the step counts
// towards ws's usage. A quota that leaves less than the step's floor
// (256 MiB, a quarter of a CPU, 256 MiB of disk, or the quota itself if
// smaller), or no place for one more running sandbox, or no sandbox-hours
// of the day, refuses it with errdefs.ErrResourceExhausted.
func (k *Keeper) AdmitBuildStep(ctx context.Context, ws string, want StepLimits) (_ StepLimits, release func(), err error) {
	q, err := k.WorkspaceQuota(ctx, ws)
	if err != nil {
		return StepLimits{}, nil, err
	}
	if q == (store.Quota{}) {
		return want, func() {}, nil
	}
	unlock, err := k.locks.Lock(ctx, ws)
	if err != nil {
		return StepLimits{}, nil, err
	}
	defer unlock() // the hold counts from here on, in Usage
	u, err := k.Usage(ctx, ws)
	if err != nil {
		return StepLimits{}, nil, err
	}
	q = u.Quota
	over := func(what string, format string, args ...any) error {
		return errdefs.ResourceExhausted("workspace %s is at its quota of %s: %s; a template build step runs in a sandbox of its own, counted with the workspace's sandboxes: stop or suspend one first, or raise the quota", ws, what, fmt.Sprintf(format, args...))
	}
	got := want
	if q.Sandboxes > 0 && u.Sandboxes+1 > q.Sandboxes {
		return StepLimits{}, nil, over("running sandboxes", "%d of %d run", u.Sandboxes, q.Sandboxes)
	}
	if q.MemoryMB > 0 {
		left := q.MemoryMB - u.MemoryMB
		if floor := min(minStepMemoryMB, q.MemoryMB); left < floor {
			return StepLimits{}, nil, over("memory", "%d MiB of %d MiB in use, and a build step needs %d MiB at least", u.MemoryMB, q.MemoryMB, floor)
		}
		got.MemoryMB = min(want.MemoryMB, left)
	}
	if q.CPUs > 0 {
		left := q.CPUs - u.CPUs
		if floor := min(minStepCPUs, q.CPUs); left+1e-9 < floor {
			return StepLimits{}, nil, over("CPUs", "%g of %g in use, and a build step needs %g at least", u.CPUs, q.CPUs, floor)
		}
		got.CPUs = min(want.CPUs, left)
	}
	if q.DiskMB > 0 {
		left := q.DiskMB - u.DiskMB
		if floor := min(minStepDiskMB, q.DiskMB); left < floor {
			return StepLimits{}, nil, over("disk", "%d MiB of %d MiB given to its sandboxes, and a build step needs %d MiB at least", u.DiskMB, q.DiskMB, floor)
		}
		got.DiskMB = min(want.DiskMB, left)
	}
	if q.SandboxHours > 0 && u.SandboxHours >= q.SandboxHours {
		return StepLimits{}, nil, over("sandbox-hours", "%.2f of %g hours used on %s (UTC); it starts again at midnight UTC", u.SandboxHours, q.SandboxHours, u.Day)
	}
	n := &hook.Admission{Workspace: ws, MemoryMB: got.MemoryMB, CPUs: got.CPUs, DiskMB: got.DiskMB}
	k.buildSteps.add(n)
	return got, sync.OnceFunc(func() { k.buildSteps.remove(n) }), nil
}
