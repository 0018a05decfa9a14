package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// What GET /v1/nodes tells the administrator (client.Node): on a node
// and on an API replica, every node's record in the store, as its last
// heartbeat told, lost ones with why; on a single box, the box itself,
// from what it would report in a heartbeat had it one.

// The roles a member is listed with.
const (
	RoleNode = "node"
	RoleAll  = "all"
)

// Members lists the node daemons from their records in the store.
type Members struct {
	Store interface {
		ListNodes(ctx context.Context) ([]*store.Node, error)
	}
	// Timeout: a node not heard from for longer is listed lost, whether
	// or not a daemon has marked it yet (DefaultTimeout when 0).
	Timeout time.Duration
}

// Nodes lists every node, by ID.
func (m Members) Nodes(ctx context.Context) ([]client.Node, error) {
	nodes, err := m.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	return listed(nodes, cmp.Or(m.Timeout, DefaultTimeout), time.Now().UTC()), nil
}

// listed is nodes as GET /v1/nodes tells them at now: up if heard from
// within timeout, else lost, saying why.
func listed(nodes []*store.Node, timeout time.Duration, now time.Time) []client.Node {
	out := make([]client.Node, 0, len(nodes))
	for _, n := range nodes {
		state, reason := store.NodeUp, ""
		if !fresh(n, timeout, now) {
			state, reason = store.NodeLost, lostReason(n)
		}
		out = append(out, nodeOf(n, RoleNode, state, reason))
	}
	return out
}

// Single is a single box (role all), which has no record in the store:
// it lists itself.
type Single struct {
	// ID is its name (--node-name, or the host's); URL its public URL.
	ID, URL   string
	StartedAt time.Time
	// Report is what it has now (Reporter.Report, with the box's own
	// sandboxes: those of no node).
	Report func(ctx context.Context) (store.NodeReport, error)
}

// Nodes lists the box, up.
func (s Single) Nodes(ctx context.Context) ([]client.Node, error) {
	rep, err := s.Report(ctx)
	if err != nil {
		return nil, err
	}
	n := &store.Node{ID: s.ID, URL: s.URL, Report: rep, StartedAt: s.StartedAt, HeartbeatAt: time.Now().UTC()}
	return []client.Node{nodeOf(n, RoleAll, store.NodeUp, "")}, nil
}

// nodeOf is node n as GET /v1/nodes tells it.
func nodeOf(n *store.Node, role, state, reason string) client.Node {
	r := n.Report
	out := client.Node{
		ID: n.ID, Role: role, URL: n.URL, State: state, Reason: reason, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt,
		CPUs: r.CPUs, MemoryMB: r.MemoryMB, CommittedCPUs: r.CommittedCPUs, CommittedMemoryMB: r.CommittedMemoryMB,
		Sandboxes: r.Sandboxes, Templates: maps.Clone(r.Templates), Warm: maps.Clone(r.Warm),
		Runtimes: slices.Clone(r.Runtimes), Version: r.Version,
	}
	// Empty, not null, in the JSON: a node that has none.
	if out.Templates == nil {
		out.Templates = map[string]string{}
	}
	if out.Warm == nil {
		out.Warm = map[string]int{}
	}
	if out.Runtimes == nil {
		out.Runtimes = []string{}
	}
	return out
}

// nodesPath is the route a replica answers itself: the nodes, lost ones
// too, are the store's to tell, not a node's, and a node may be the one
// lost.
const nodesPath = "/v1/nodes"

// serveNodes answers GET /v1/nodes on a replica, from the store, to the
// administrator alone (a node's ownerOnly): a key gets 403, no key or a
// wrong one 401, as from a node.
func (rt *Router) serveNodes(w http.ResponseWriter, r *http.Request) {
	admin, k, err := rt.keyOf(r)
	if err == nil && !admin {
		err = errdefs.PermissionDenied("key %s may not list the nodes: use the daemon's own key (api.key)", k.Name)
	}
	if err != nil {
		if errdefs.Kind(err) == errdefs.ErrUnauthenticated {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hutch"`)
		}
		api.WriteError(w, r, rt.log, err)
		return
	}
	nodes, err := rt.readNodes(r.Context())
	if err != nil {
		api.WriteError(w, r, rt.log, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(listed(nodes, rt.cfg.Timeout, time.Now().UTC())) // the caller may be gone
}
