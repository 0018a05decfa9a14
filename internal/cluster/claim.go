package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Claim checks that no other live daemon holds node name, before a node
// starts under it (before it recovers the sandboxes of that name as its
// own). A record of the name that is up, heard from less than timeout
// (DefaultTimeout when 0) before now, with another fingerprint than this
// node's (its certificate, kept in its data directory, so the same across
// its restarts) is another daemon: two nodes on one host both default to
// the host's name, and sharing it each would take the other's sandboxes
// for lost. That is refused, saying so.
func Claim(ctx context.Context, st store.Nodes, name, fingerprint string, timeout time.Duration, now time.Time) error {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return fmt.Errorf("look for a node named %s: %w", name, err)
	}
	for _, n := range nodes {
		if n.ID != name || n.State != store.NodeUp || n.Fingerprint == fingerprint {
			continue
		}
		if ago := now.Sub(n.HeartbeatAt); ago < timeout {
			return errdefs.Conflict("node name %s is held by a live node at %s (its last heartbeat %s ago): "+
				"give this node another name (--node-name; two nodes on one host both default to the host's name), "+
				"or stop that node and start this one after %s", name, n.URL, ago.Round(time.Second), timeout)
		}
	}
	return nil
}
