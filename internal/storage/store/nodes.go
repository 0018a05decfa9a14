package store

import (
	"context"
	"time"
)

// Nodes is the scale-out's membership: a record per node daemon, which
// its heartbeat keeps current, and which an API replica places sandboxes
// by (see internal/cluster).
type Nodes interface {
	// PutNode inserts or replaces node n's record: its heartbeat. A node
	// marked lost that beats again is up.
	PutNode(ctx context.Context, n *Node) error
	// ListNodes returns every node, by ID.
	ListNodes(ctx context.Context) ([]*Node, error)
	// MarkNodeLost marks node id lost, saying reason, if it is up and
	// its last heartbeat is before before; then its sandboxes in one of
	// the states live go to error with reason, in the same transaction.
	// marked says whether this call did it (of several daemons noticing
	// at once, one does).
	MarkNodeLost(ctx context.Context, id string, before time.Time, reason string, live []State, at time.Time) (marked bool, err error)
	// DeleteNode removes a node's record; ErrNotFound if absent.
	DeleteNode(ctx context.Context, id string) error

	// PublishTemplate records t as its name's current version unless the
	// store has that name at the same or a newer version (versions sort
	// as their times); published says whether it did.
	PublishTemplate(ctx context.Context, t *ClusterTemplate) (published bool, err error)
	// ListClusterTemplates returns every template's record, by name.
	ListClusterTemplates(ctx context.Context) ([]*ClusterTemplate, error)
	// UnpublishTemplate removes a template's record (absent is fine).
	UnpublishTemplate(ctx context.Context, name string) error

	// SetImage records image as the image of sandbox id, held by node:
	// ErrNotFound if absent, ErrConflict if another node holds it, or if
	// image is not "" and it is not suspended.
	SetImage(ctx context.Context, id, node, image string) error
	// MoveSandbox makes node to the holder of sandbox id, suspended with
	// an image, if from holds it: ErrNotFound if absent, ErrConflict
	// (saying what it is) otherwise.
	MoveSandbox(ctx context.Context, id, from, to string, at time.Time) error
}

// ClusterTemplate is a template as the nodes share it: its current
// version, the node that made it, and its info (rootfs.Info as JSON).
type ClusterTemplate struct {
	Name, Version, Origin string
	Info                  []byte
	UpdatedAt             time.Time
}

// A node's states.
const (
	NodeUp   = "up"
	NodeLost = "lost"
)

// Node is a node daemon, as its last heartbeat told.
type Node struct {
	ID string
	// URL is its API, as the API replicas reach it (https://).
	URL string
	// Fingerprint is the SHA-256 (hex) of the certificate it serves its
	// listeners with: the only one the others accept from it.
	Fingerprint string
	State       string // NodeUp or NodeLost
	Reason      string // why it is lost
	Report      NodeReport
	// StartedAt is when its daemon started; HeartbeatAt its last beat.
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// NodeReport is what a node tells with each heartbeat: where else it is
// reached, its capacity, and what it has.
type NodeReport struct {
	// E2BURL is its E2B front ("": none).
	E2BURL string `json:"e2b_url,omitempty"`
	// CPUs and MemoryMB are the machine's; the committed ones are what
	// the limits of its live sandboxes add up to.
	CPUs              float64 `json:"cpus"`
	MemoryMB          int64   `json:"memory_mb"`
	CommittedCPUs     float64 `json:"committed_cpus"`
	CommittedMemoryMB int64   `json:"committed_memory_mb"`
	// Sandboxes counts those it holds, live or not.
	Sandboxes int `json:"sandboxes"`
	// Runtimes are the runtimes it can run; DefaultRuntime and
	// DefaultTemplate what a create naming none gets.
	Runtimes        []string `json:"runtimes"`
	DefaultRuntime  string   `json:"default_runtime"`
	DefaultTemplate string   `json:"default_template"`
	// Templates are the templates it has: version by name.
	Templates map[string]string `json:"templates"`
	// Warm counts its warm pools' ready sandboxes by TEMPLATE@RUNTIME.
	Warm map[string]int `json:"warm,omitempty"`
	// Version is its daemon's version.
	Version string `json:"version"`
}
