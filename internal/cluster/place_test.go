package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

func node(id string, mod func(*store.Node)) *store.Node {
	n := &store.Node{
		ID: id, URL: "http://" + id + ":7070", State: store.NodeUp, HeartbeatAt: time.Now().UTC(),
		Report: store.NodeReport{
			CPUs: 8, MemoryMB: 16384, Runtimes: []string{"gvisor", "runc"}, DefaultRuntime: "gvisor", DefaultTemplate: "host",
			Templates: map[string]string{"host": "1", "base": "v1"},
		},
	}
	if mod != nil {
		mod(n)
	}
	return n
}

func TestPlaceChoosesAmongThoseThatCan(t *testing.T) {
	stale := node("stale", func(n *store.Node) { n.HeartbeatAt = time.Now().Add(-time.Minute) })
	lost := node("lost", func(n *store.Node) { n.State = store.NodeLost })
	runcOnly := node("runc-only", func(n *store.Node) { n.Report.Runtimes = []string{"runc"} })
	noBase := node("no-base", func(n *store.Node) { delete(n.Report.Templates, "base") })
	theirs := node("theirs", func(n *store.Node) { n.Report.Templates = map[string]string{"host": "1", "py~acme": "v2"} })
	warm := node("warm", func(n *store.Node) { n.Report.Warm = map[string]int{"base@gvisor": 1} })
	tests := []struct {
		name  string
		nodes []*store.Node
		want  Want
		can   []string // the nodes it may choose
	}{
		{"only nodes up and heard from", []*store.Node{stale, lost, runcOnly}, Want{}, []string{"runc-only"}},
		{"the runtime asked for", []*store.Node{runcOnly, noBase}, Want{Runtime: "gvisor"}, []string{"no-base"}},
		{"the default runtime of each", []*store.Node{runcOnly, noBase}, Want{Template: "host"}, []string{"runc-only", "no-base"}},
		{"the template asked for", []*store.Node{noBase, runcOnly}, Want{Template: "base", Runtime: "runc"}, []string{"runc-only"}},
		{"a workspace's template by its name", []*store.Node{noBase, theirs}, Want{Template: "py"}, []string{"theirs"}},
		{"a warm sandbox first", []*store.Node{noBase, runcOnly, warm, node("cold", nil)}, Want{Template: "base", Runtime: "gvisor"}, []string{"warm"}},
		{"none can: one of those up says why", []*store.Node{noBase, stale}, Want{Template: "base"}, []string{"no-base"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // the sample is random
				got, err := (&Placer{}).Place(tt.nodes, tt.want)
				if err != nil {
					t.Fatal(err)
				}
				ok := false
				for _, id := range tt.can {
					ok = ok || got.ID == id
				}
				if !ok {
					t.Fatalf("placed on %s, want one of %v", got.ID, tt.can)
				}
			}
		})
	}
}

func TestPlaceWithNoNodeUp(t *testing.T) {
	_, err := (&Placer{}).Place([]*store.Node{node("lost", func(n *store.Node) { n.State = store.NodeLost })}, Want{})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("no node up: %v, want unavailable", err)
	}
}

// Placements between two heartbeats count: creates in a burst spread
// over equal nodes instead of piling onto the one that looked best.
func TestPlaceSpreadsABurst(t *testing.T) {
	nodes := []*store.Node{node("a", nil), node("b", nil), node("c", nil)}
	p := &Placer{}
	count := map[string]int{}
	for range 30 {
		n, err := p.Place(nodes, Want{MemoryMB: 512, CPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		count[n.ID]++
	}
	for _, n := range nodes {
		if c := count[n.ID]; c < 8 || c > 12 {
			t.Errorf("30 placements on 3 equal nodes: %v", count)
			break
		}
	}
	// A node's new report replaces what was counted for it.
	nodes[0].HeartbeatAt = nodes[0].HeartbeatAt.Add(time.Second)
	if f := p.free(nodes[0]); f != 1 {
		t.Errorf("free after a new report of nothing committed: %v, want 1", f)
	}
}

// Overcommitted nodes (limits are bounds, not use) still take sandboxes:
// the least overcommitted.
func TestPlaceOvercommitted(t *testing.T) {
	a := node("a", func(n *store.Node) { n.Report.CPUs, n.Report.CommittedCPUs = 2, 9 })
	b := node("b", func(n *store.Node) { n.Report.CPUs, n.Report.CommittedCPUs = 2, 6 })
	p := &Placer{Sample: 2}
	if got, err := p.Place([]*store.Node{a, b}, Want{CPUs: 1}); err != nil || got.ID != "b" {
		t.Errorf("placed on %v, %v; want b", got, err)
	}
}

// The scarcer of memory and CPU decides.
func TestPlacePrefersTheMostLeft(t *testing.T) {
	busyCPU := node("busy-cpu", func(n *store.Node) { n.Report.CommittedCPUs = 7 })
	busyMem := node("busy-memory", func(n *store.Node) { n.Report.CommittedMemoryMB = 12000 })
	idle := node("idle", func(n *store.Node) { n.Report.CommittedCPUs, n.Report.CommittedMemoryMB = 2, 2048 })
	p := &Placer{Sample: 3}
	if got, _ := p.Place([]*store.Node{busyCPU, busyMem, idle}, Want{}); got.ID != "idle" {
		t.Errorf("placed on %s, want idle", got.ID)
	}
}
