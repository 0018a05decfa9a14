package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// State is what a scrape reads: each func is called once per scrape.
type State struct {
	// Sandboxes lists every sandbox's record.
	Sandboxes func(ctx context.Context) ([]*store.Sandbox, error)
	// Node is this daemon's node: the sandboxes it holds are its
	// hutch_sandboxes; a workspace's use counts every node's.
	Node string
	// Pools are the warm pools, how big and how full.
	Pools func(ctx context.Context) []Pool
	// Workspaces lists the workspaces with their quotas.
	Workspaces func(ctx context.Context) ([]store.Workspace, error)
	// Egress is what the sandboxes' connections carried and what their
	// policies refused since the daemon started.
	Egress func() (network.Counters, map[network.Refusal]int64)
	// Nodes lists the cluster's nodes (none on a single box).
	Nodes  func(ctx context.Context) ([]*store.Node, error)
	Logger *slog.Logger
}

// Pool is one warm pool.
type Pool struct {
	Template, Runtime string
	Size, Ready       int
}

// scrapeTimeout bounds the reads of one scrape.
const scrapeTimeout = 10 * time.Second

// stateCollector reads State at each scrape (prometheus.Collector).
type stateCollector struct {
	st State

	sandboxes, poolSize, poolReady, quota, used *prometheus.Desc
	egressBytes, egressConns, refusals          *prometheus.Desc
	nodes, nodeSandboxes, nodeHeartbeat         *prometheus.Desc
}

func newStateCollector(st State) *stateCollector {
	if st.Logger == nil {
		st.Logger = slog.New(slog.DiscardHandler)
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &stateCollector{
		st:            st,
		sandboxes:     d("sandboxes", "Sandboxes this node holds, by state, runtime and workspace.", "state", "runtime", "workspace"),
		poolSize:      d("warm_pool_size", "Sandboxes a warm pool keeps ready when full, by template and runtime.", "template", "runtime"),
		poolReady:     d("warm_pool_ready", "Sandboxes ready in a warm pool now, by template and runtime.", "template", "runtime"),
		quota:         d("workspace_quota", "A workspace's quota, by resource (sandboxes, memory_bytes, cpus, disk_bytes); absent: no bound.", "workspace", "resource"),
		used:          d("workspace_usage", "What a workspace's sandboxes use of what its quota bounds, by resource, across nodes.", "workspace", "resource"),
		egressBytes:   d("egress_bytes_total", "Bytes the sandboxes' outbound connections carried, by direction (out: sent, in: received).", "direction"),
		egressConns:   d("egress_connections_total", "Outbound connections the sandboxes' policies let through."),
		refusals:      d("egress_refusals_total", "Connections and lookups the sandboxes' policies refused, by kind (dns, tcp, udp) and by what refused (mode, always, rule).", "kind", "by"),
		nodes:         d("nodes", "The cluster's nodes, by state (up, lost).", "state"),
		nodeSandboxes: d("node_sandboxes", "Sandboxes each node holds, as its last heartbeat told.", "node"),
		nodeHeartbeat: d("node_heartbeat_age_seconds", "How long ago each node's last heartbeat was.", "node"),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sandboxes, c.poolSize, c.poolReady, c.quota, c.used, c.egressBytes, c.egressConns, c.refusals, c.nodes, c.nodeSandboxes, c.nodeHeartbeat} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if c.st.Sandboxes != nil {
		recs, err := c.st.Sandboxes(ctx)
		if err != nil {
			c.st.Logger.Warn("metrics: list sandboxes", "error", err)
			ch <- prometheus.NewInvalidMetric(c.sandboxes, err)
		} else {
			c.collectSandboxes(recs, gauge)
		}
	}
	if c.st.Pools != nil {
		for _, p := range c.st.Pools(ctx) {
			gauge(c.poolSize, float64(p.Size), p.Template, p.Runtime)
			gauge(c.poolReady, float64(p.Ready), p.Template, p.Runtime)
		}
	}
	if c.st.Workspaces != nil {
		wss, err := c.st.Workspaces(ctx)
		if err != nil {
			c.st.Logger.Warn("metrics: list workspaces", "error", err)
			ch <- prometheus.NewInvalidMetric(c.quota, err)
		}
		for _, ws := range wss {
			for res, v := range quotaOf(ws.Quota) {
				gauge(c.quota, v, ws.Name, res)
			}
		}
	}
	if c.st.Nodes != nil {
		nodes, err := c.st.Nodes(ctx)
		if err != nil {
			c.st.Logger.Warn("metrics: list nodes", "error", err)
			ch <- prometheus.NewInvalidMetric(c.nodes, err)
		}
		states := map[string]int{}
		for _, n := range nodes {
			states[n.State]++
			gauge(c.nodeSandboxes, float64(n.Report.Sandboxes), n.ID)
			gauge(c.nodeHeartbeat, time.Since(n.HeartbeatAt).Seconds(), n.ID)
		}
		for state, k := range states {
			gauge(c.nodes, float64(k), state)
		}
	}
	if c.st.Egress != nil {
		sum, refusals := c.st.Egress()
		counter(c.egressBytes, float64(sum.BytesOut), "out")
		counter(c.egressBytes, float64(sum.BytesIn), "in")
		counter(c.egressConns, float64(sum.Connections))
		for r, n := range refusals {
			counter(c.refusals, float64(n), r.Kind, r.By)
		}
	}
}

// collectSandboxes counts this node's sandboxes by state, runtime and
// workspace, and every node's use of each workspace's quota.
func (c *stateCollector) collectSandboxes(recs []*store.Sandbox, gauge func(*prometheus.Desc, float64, ...string)) {
	type key struct{ state, runtime, workspace string }
	held := map[key]int{}
	use := map[string]map[string]float64{}
	for _, rec := range recs {
		if c.st.Node == "" || rec.Node == "" || rec.Node == c.st.Node {
			held[key{string(rec.State), rec.Backend, rec.Workspace}]++
		}
		u := use[rec.Workspace]
		if u == nil {
			u = map[string]float64{"sandboxes": 0, "memory_bytes": 0, "cpus": 0, "disk_bytes": 0}
			use[rec.Workspace] = u
		}
		u["disk_bytes"] += float64(rec.DiskMB << 20)
		if store.HoldsResources(rec.State) {
			u["sandboxes"]++
			u["memory_bytes"] += float64(rec.MemoryMB << 20)
			u["cpus"] += rec.CPUs
		}
	}
	for k, n := range held {
		gauge(c.sandboxes, float64(n), k.state, k.runtime, k.workspace)
	}
	for ws, u := range use {
		for res, v := range u {
			gauge(c.used, v, ws, res)
		}
	}
}

// quotaOf is q's bounds by resource, those it sets only.
func quotaOf(q store.Quota) map[string]float64 {
	out := map[string]float64{}
	if q.Sandboxes > 0 {
		out["sandboxes"] = float64(q.Sandboxes)
	}
	if q.MemoryMB > 0 {
		out["memory_bytes"] = float64(q.MemoryMB << 20)
	}
	if q.CPUs > 0 {
		out["cpus"] = q.CPUs
	}
	if q.DiskMB > 0 {
		out["disk_bytes"] = float64(q.DiskMB << 20)
	}
	return out
}
