// Package cluster is Hutch on several hosts: node daemons (hutch serve
// --role node) run sandboxes on their own host as a single box does, and
// API replicas (--role api) serve the public API and send each call to the
// node that holds its sandbox. They share one store (PostgreSQL), which is
// all they share: no consensus of Hutch's own, and no scheduler of hosts.
//
//	client ──▶ API replica ──▶ node daemon ──▶ sandboxes (runc, gVisor)
//	              │  (any)        │ (the one holding the sandbox)
//	              └──── store ────┘  nodes' heartbeats, sandboxes' records
//
// Membership: each node writes its record, with its capacity, what it
// has, and the fingerprint of the certificate it serves (tls.go), every
// heartbeat (Beat). Every daemon watches the records (Watch):
// a node silent for longer than the timeout is marked lost, and its live
// sandboxes error with that reason, in one transaction of the store, so
// that of several daemons noticing at once one does it.
//
// Placement: a create goes to the best of K nodes sampled among those
// that can make it (Placer). A keyed get-or-create is decided by the
// store's unique key: of two nodes racing, the loser finds the winner's
// sandbox and answers misdirected, naming the winner, where the replica
// sends the call again (Router).
//
// Trust: every call to a node is TLS, pinned to the certificate the
// node's record names (tls.go), and carries the cluster key, which no
// tenant holds (key.go); a node refuses any call without it.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hutchdev/hutch/internal/core/events"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Defaults of the membership's timing: a node beats every
// DefaultHeartbeat and is lost after DefaultTimeout without one (three
// beats missed).
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultTimeout   = 15 * time.Second
)

// live are the states a lost node's sandboxes leave for error: those that
// ran, or were on their way, on a host no one hears from. Suspended and
// stopped ones keep their state: their files are on that host's disk (or
// in the shared image store), not in its memory.
var live = []store.State{
	store.Creating, store.Running, store.Paused,
	store.Suspending, store.Resuming, store.Stopping,
}

// Member is a node daemon's membership.
type Member struct {
	Store store.Nodes
	// ID names the node; URL is its API as the replicas reach it
	// (https://), and Fingerprint the SHA-256 of the certificate it
	// serves there (Identity), which the replicas accept from it alone.
	ID, URL, Fingerprint string
	// Report tells what the node has now, for each heartbeat.
	Report func(ctx context.Context) (store.NodeReport, error)
	// Every is the heartbeat's interval (DefaultHeartbeat when 0).
	Every time.Duration
	Log   *slog.Logger
}

// Beat records m's heartbeat at once, then every m.Every until ctx ends.
// A beat that fails is logged and tried again at the next: the node keeps
// serving what it holds meanwhile.
func Beat(ctx context.Context, m Member) error {
	every := m.Every
	if every == 0 {
		every = DefaultHeartbeat
	}
	started := time.Now().UTC()
	beat := func() error {
		report, err := m.Report(ctx)
		if err != nil {
			return fmt.Errorf("tell what node %s has: %w", m.ID, err)
		}
		return m.Store.PutNode(ctx, &store.Node{
			ID: m.ID, URL: m.URL, Fingerprint: m.Fingerprint, State: store.NodeUp, Report: report,
			StartedAt: started, HeartbeatAt: time.Now().UTC(),
		})
	}
	if err := beat(); err != nil {
		return err // a node that cannot join at start says so
	}
	m.Log.Info("node joined", "node", m.ID, "url", m.URL)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := beat(); err != nil && ctx.Err() == nil {
				m.Log.Warn("heartbeat failed", "node", m.ID, "error", err)
			}
		}
	}
}

// WatchStore is what Watch reads and marks.
type WatchStore interface {
	store.Nodes
	ListSandboxes(ctx context.Context) ([]*store.Sandbox, error)
}

// Watch marks lost every node whose last heartbeat is older than timeout,
// looking every timeout/3, until ctx ends; emit hears of each sandbox a
// lost node took into error (an event, reason node_lost).
func Watch(ctx context.Context, st WatchStore, timeout time.Duration, emit func(*store.Event), log *slog.Logger) error {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	t := time.NewTicker(timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := markLost(ctx, st, timeout, emit, log); err != nil && ctx.Err() == nil {
				log.Warn("look for lost nodes", "error", err)
			}
		}
	}
}

// markLost marks lost the nodes silent for longer than timeout.
func markLost(ctx context.Context, st WatchStore, timeout time.Duration, emit func(*store.Event), log *slog.Logger) error {
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for _, n := range nodes {
		if n.State != store.NodeUp || now.Sub(n.HeartbeatAt) <= timeout {
			continue
		}
		reason := fmt.Sprintf("node %s lost: no heartbeat since %s", n.ID, n.HeartbeatAt.Format(time.RFC3339))
		marked, err := st.MarkNodeLost(ctx, n.ID, now.Add(-timeout), reason, live, now)
		if err != nil {
			return err
		}
		if marked {
			log.Warn("node lost: its running sandboxes are marked error", "node", n.ID, "last_heartbeat", n.HeartbeatAt)
			if err := tellLost(ctx, st, n.ID, reason, now, emit); err != nil {
				log.Warn("events of a lost node's sandboxes", "node", n.ID, "error", err)
			}
		}
	}
	return nil
}

// tellLost emits an event for each sandbox of node that MarkNodeLost
// took into error, saying reason.
func tellLost(ctx context.Context, st WatchStore, node, reason string, at time.Time, emit func(*store.Event)) error {
	recs, err := st.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Node == node && rec.State == store.Error && rec.StateReason == reason {
			emit(&store.Event{Time: at, Workspace: rec.Workspace, Sandbox: rec.ID, Type: events.Errored, Reason: hook.CauseNodeLost, Message: reason,
				Data: map[string]string{"template": rec.Template, "runtime": rec.Backend, "node": node}})
		}
	}
	return nil
}

// fresh says whether node n is up and heard from within timeout.
func fresh(n *store.Node, timeout time.Duration, now time.Time) bool {
	return n.State == store.NodeUp && now.Sub(n.HeartbeatAt) <= timeout
}
