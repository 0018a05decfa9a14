package cluster

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// DefaultSample is how many nodes a placement compares: the best of two
// random choices spreads load nearly as well as looking at every node,
// and replicas placing at once with stale reports do not all pick the
// same one.
const DefaultSample = 2

// Want is what a create asks of a node.
type Want struct {
	// Template and Runtime are the create's ("": the node's default);
	// TemplateVersion, when not "", the version the node must have (a
	// moved sandbox's files lie on it).
	Template, TemplateVersion, Runtime string
	MemoryMB                           int64
	CPUs                               float64
}

// Placer chooses nodes for new sandboxes.
type Placer struct {
	// Sample is K, how many candidates are compared (DefaultSample
	// when 0).
	Sample int
	// Timeout: nodes not heard from for longer are not candidates.
	Timeout time.Duration

	mu sync.Mutex
	// pending is what this replica placed on each node since that node's
	// last report, which does not count it yet.
	pending map[string]pending
}

type pending struct {
	since    time.Time // the report it adds to
	memoryMB int64
	cpus     float64
}

// Place returns the node for a sandbox that wants w: among the nodes up
// that can run it (its runtime, its template), those with a warm sandbox
// of it ready first, the best of Sample of them chosen at random, best
// being the most memory and CPU left uncommitted, as a share of the
// machine (the scarcer of the two counts).
func (p *Placer) Place(nodes []*store.Node, w Want) (*store.Node, error) {
	now := time.Now().UTC()
	var up, able, warm []*store.Node
	for _, n := range nodes {
		if !fresh(n, p.timeout(), now) {
			continue
		}
		up = append(up, n)
		if !canRun(n, w) {
			continue
		}
		able = append(able, n)
		if n.Report.Warm[orDefault(w.Template, n.Report.DefaultTemplate)+"@"+orDefault(w.Runtime, n.Report.DefaultRuntime)] > 0 {
			warm = append(warm, n)
		}
	}
	switch {
	case len(up) == 0:
		return nil, errdefs.Unavailable("no node is up: start one with hutch serve --role node and this --store")
	case len(able) == 0:
		// None can say yes; one says why not (no such template, a
		// runtime it cannot run) as a single box would.
		able = up
	}
	candidates := able
	if len(warm) > 0 {
		candidates = warm
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	best := p.bestOf(sample(candidates, p.sample()))
	p.add(best, w)
	return best, nil
}

// canRun says whether node n can make a sandbox that wants w: its
// runtime, its template (at its version, when w names one).
func canRun(n *store.Node, w Want) bool {
	name := orDefault(w.Template, n.Report.DefaultTemplate)
	if !slices.Contains(n.Report.Runtimes, orDefault(w.Runtime, n.Report.DefaultRuntime)) || !hasTemplate(n, name) {
		return false
	}
	// The host template is every node's own, of its own host.
	return w.TemplateVersion == "" || name == rootfs.HostName || n.Report.Templates[name] == w.TemplateVersion
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// hasTemplate says whether node n has template name, its own or, named
// without a workspace, one of a workspace's (NAME~WORKSPACE): which one a
// create means, the node decides by the caller's key.
func hasTemplate(n *store.Node, name string) bool {
	if _, ok := n.Report.Templates[name]; ok {
		return true
	}
	for t := range n.Report.Templates {
		if base, _, ok := strings.Cut(t, "~"); ok && base == name {
			return true
		}
	}
	return false
}

// sample returns up to k of nodes, chosen at random.
func sample(nodes []*store.Node, k int) []*store.Node {
	if len(nodes) <= k {
		return nodes
	}
	out := slices.Clone(nodes)
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:k]
}

// bestOf returns the node with the most left, as a share of its machine:
// limits may commit more than a machine has (they are bounds, not use),
// so the least overcommitted, then.
func (p *Placer) bestOf(nodes []*store.Node) *store.Node {
	best, bestFree := nodes[0], p.free(nodes[0])
	for _, n := range nodes[1:] {
		if f := p.free(n); f > bestFree {
			best, bestFree = n, f
		}
	}
	return best
}

// free is the share of node n's memory or CPU, the scarcer, that its
// live sandboxes' limits (and what was placed there since it said so)
// leave.
func (p *Placer) free(n *store.Node) float64 {
	r := n.Report
	pend := p.pending[n.ID]
	if !pend.since.Equal(n.HeartbeatAt) {
		pend = pending{}
	}
	mem, cpu := 1.0, 1.0
	if r.MemoryMB > 0 {
		mem = 1 - float64(r.CommittedMemoryMB+pend.memoryMB)/float64(r.MemoryMB)
	}
	if r.CPUs > 0 {
		cpu = 1 - (r.CommittedCPUs+pend.cpus)/r.CPUs
	}
	return min(mem, cpu)
}

// add counts w as placed on n until n's next report.
func (p *Placer) add(n *store.Node, w Want) {
	if p.pending == nil {
		p.pending = map[string]pending{}
	}
	pend := p.pending[n.ID]
	if !pend.since.Equal(n.HeartbeatAt) {
		pend = pending{since: n.HeartbeatAt}
	}
	pend.memoryMB += w.MemoryMB
	pend.cpus += w.CPUs
	p.pending[n.ID] = pend
}

func (p *Placer) sample() int {
	if p.Sample > 0 {
		return p.Sample
	}
	return DefaultSample
}

func (p *Placer) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}
