package api

import (
	"context"
	"net/http"

	"github.com/hutchdev/hutch/client"
)

// Nodes tells the cluster's members (internal/cluster): on a node, every
// node's record in the store; on a single box, the box itself.
type Nodes interface {
	Nodes(ctx context.Context) ([]client.Node, error)
}

// listNodes answers GET /v1/nodes, to the administrator alone: the
// nodes' addresses, capacity and load are the operator's, no
// workspace's. An API replica answers it itself (internal/cluster), from
// the same records.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r, "list the nodes"); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := []client.Node{}
	if s.nodes != nil {
		list, err := s.nodes.Nodes(r.Context())
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		out = append(out, list...)
	}
	writeJSON(w, http.StatusOK, out)
}
