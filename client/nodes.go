package client

import (
	"context"
	"net/http"
)

// ListNodes returns the cluster's members, by ID (the daemon's own key
// only): each node daemon as its last heartbeat told, lost ones with
// why; a single box answers for itself.
func (c *Client) ListNodes(ctx context.Context) ([]Node, error) {
	var out []Node
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/nodes"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}
