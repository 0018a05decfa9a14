package core

import (
	"context"
	"maps"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/storage/store"
)

// NodeReport is what this daemon tells as a node in each heartbeat
// (internal/cluster): what the machine has, what its live sandboxes'
// limits commit of it, and what it can make sandboxes of and with. The
// caller adds where it is reached.
func (m *Manager) NodeReport(ctx context.Context) (store.NodeReport, error) {
	held, err := m.held(ctx)
	if err != nil {
		return store.NodeReport{}, err
	}
	r := store.NodeReport{
		CPUs: float64(runtime.NumCPU()), MemoryMB: machineMemoryMB(),
		Sandboxes: len(held), DefaultRuntime: m.def, DefaultTemplate: DefaultTemplate,
		Templates: map[string]string{}, Warm: map[string]int{},
	}
	for _, rec := range held {
		if store.HoldsResources(rec.State) {
			r.CommittedCPUs += rec.CPUs
			r.CommittedMemoryMB += rec.MemoryMB
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.backends)) {
		if !m.usable.broken(name) {
			r.Runtimes = append(r.Runtimes, name)
		}
	}
	infos, err := m.templates.List()
	if err != nil {
		return store.NodeReport{}, err
	}
	for _, t := range infos {
		r.Templates[t.Name] = t.Version
	}
	for _, p := range m.pools() {
		r.Warm[p.Template+"@"+p.Runtime] = p.Ready
	}
	return r, nil
}

// machineMemoryMB is the machine's memory (MemTotal), 0 when unknown.
func machineMemoryMB() int64 {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0
	}
	return int64(info.Totalram) * int64(info.Unit) >> 20 // #nosec G115 -- a machine's memory fits
}
