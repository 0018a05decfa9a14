package cluster

import (
	"context"
	"runtime"
	"slices"

	"github.com/hutchdev/hutch/internal/core/create"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Reporter tells what a node has in each heartbeat (Member.Report): what
// the machine has, what its live sandboxes' limits commit of it, and what
// it can make sandboxes of and with. The caller adds where it is reached.
type Reporter struct {
	Store interface {
		ListSandboxes(ctx context.Context) ([]*store.Sandbox, error)
	}
	// Node is this node's name: the sandboxes of its name are its own.
	Node string
	// Health is the kernel's report (core.Manager.Health).
	Health    func(ctx context.Context) core.Health
	Templates interface{ List() ([]rootfs.Info, error) }
	// CPUs and MemoryMB are the machine's (its own when 0).
	CPUs     float64
	MemoryMB int64
	// Version is the daemon's version.
	Version string
}

// Report is the node's report now.
func (r Reporter) Report(ctx context.Context) (store.NodeReport, error) {
	recs, err := r.Store.ListSandboxes(ctx)
	if err != nil {
		return store.NodeReport{}, err
	}
	h := r.Health(ctx)
	rep := store.NodeReport{
		CPUs: r.CPUs, MemoryMB: r.MemoryMB, DefaultRuntime: h.Default, DefaultTemplate: create.DefaultTemplate,
		Runtimes: slices.Clone(h.Usable), Templates: map[string]string{}, Warm: map[string]int{}, Version: r.Version,
	}
	if rep.CPUs == 0 {
		rep.CPUs = float64(runtime.NumCPU())
	}
	if rep.MemoryMB == 0 {
		rep.MemoryMB = machineMemoryMB()
	}
	for _, rec := range recs {
		if rec.Node != r.Node {
			continue
		}
		rep.Sandboxes++
		if store.HoldsResources(rec.State) {
			rep.CommittedCPUs += rec.CPUs
			rep.CommittedMemoryMB += rec.MemoryMB
		}
	}
	infos, err := r.Templates.List()
	if err != nil {
		return store.NodeReport{}, err
	}
	for _, t := range infos {
		rep.Templates[t.Name] = t.Version
	}
	for _, p := range h.Pools {
		rep.Warm[p.Template+"@"+p.Runtime] = p.Ready
	}
	return rep, nil
}

// machineMemoryMB is the machine's memory (MemTotal), 0 when unknown.
func machineMemoryMB() int64 {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0
	}
	return int64(info.Totalram) * int64(info.Unit) >> 20 // #nosec G115 -- a machine's memory fits
}
