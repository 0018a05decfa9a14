package cluster

import (
	"context"
	"reflect"
	"testing"

	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

type sandboxList []*store.Sandbox

func (l sandboxList) ListSandboxes(context.Context) ([]*store.Sandbox, error) { return l, nil }

type templateList []rootfs.Info

func (l templateList) List() ([]rootfs.Info, error) { return l, nil }

// A node reports its own sandboxes only, commits the limits of those that
// hold resources, and names the runtimes, templates and warm sandboxes it
// has.
func TestReport(t *testing.T) {
	r := Reporter{
		Store: sandboxList{
			{ID: "a", Node: "n1", State: store.Running, CPUs: 1, MemoryMB: 512},
			{ID: "b", Node: "n1", State: store.Suspended, CPUs: 2, MemoryMB: 1024},
			{ID: "c", Node: "n1", State: store.Paused, CPUs: 0.5, MemoryMB: 256},
			{ID: "d", Node: "n2", State: store.Running, CPUs: 4, MemoryMB: 4096},
		},
		Node: "n1",
		Health: func(context.Context) core.Health {
			return core.Health{Default: "runsc", Usable: []string{"runc", "runsc"},
				Pools: []core.PoolStatus{{Template: "base", Runtime: "runc", Ready: 2}}}
		},
		Templates: templateList{{Name: "base", Version: "v1"}, {Name: "python", Version: "v7"}},
		CPUs:      8, MemoryMB: 16384, Version: "1.2.3",
	}
	got, err := r.Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := store.NodeReport{
		CPUs: 8, MemoryMB: 16384, Sandboxes: 3, CommittedCPUs: 1.5, CommittedMemoryMB: 768,
		DefaultRuntime: "runsc", DefaultTemplate: create.DefaultTemplate, Runtimes: []string{"runc", "runsc"},
		Templates: map[string]string{"base": "v1", "python": "v7"}, Warm: map[string]int{"base@runc": 2}, Version: "1.2.3",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("report\n got %+v\nwant %+v", got, want)
	}
	r.CPUs, r.MemoryMB = 0, 0 // the machine's own
	if got, err := r.Report(t.Context()); err != nil || got.CPUs < 1 || got.MemoryMB < 1 {
		t.Fatalf("machine's own CPUs %v and memory %v MiB (%v), want both found", got.CPUs, got.MemoryMB, err)
	}
}
