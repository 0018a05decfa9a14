package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Checkpoint is a record of a sandbox's files (and under gVisor, with
// Memory, its memory and processes) at one moment, to compare with and
// roll back to.
type Checkpoint struct {
	ID        string    `json:"id"` // c1, c2, … in the order they were taken
	Name      string    `json:"name,omitempty"`
	Note      string    `json:"note,omitempty"` // why: the tool call it came before
	CreatedAt time.Time `json:"created_at"`
	Memory    bool      `json:"memory"`
	// SizeBytes is what its files (and memory) hold, shared with the
	// sandbox's files where they did not change since.
	SizeBytes int64 `json:"size_bytes"`
}

// CheckpointRequest takes a checkpoint: a name, and with Memory (gVisor)
// the sandbox's memory and processes too.
type CheckpointRequest struct {
	Name   string `json:"name,omitempty"`
	Memory bool   `json:"memory,omitempty"`
}

// FileChange is a path that differs between a checkpoint and now.
type FileChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // added, changed or removed
	Type string `json:"type"` // file, dir, symlink or other
	Size int64  `json:"size,omitempty"`
}

// CheckpointDiff is what changed since a checkpoint: every path, or with a
// path asked for, that file's unified diff.
type CheckpointDiff struct {
	Checkpoint string       `json:"checkpoint"`
	Changes    []FileChange `json:"changes"`
	// Truncated: more paths changed than a diff lists (10,000).
	Truncated bool   `json:"truncated,omitempty"`
	Path      string `json:"path,omitempty"`
	Unified   string `json:"unified,omitempty"`
}

// RollbackRequest rolls back to a checkpoint: its files, and with Memory
// its memory and processes too.
type RollbackRequest struct {
	Memory bool `json:"memory,omitempty"`
}

// CreateCheckpoint takes a checkpoint of sandbox id.
func (c *Client) CreateCheckpoint(ctx context.Context, id string, req CheckpointRequest) (Checkpoint, error) {
	var out Checkpoint
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "checkpoints"), json: req}, &out)
	return out, err
}

// ListCheckpoints lists sandbox id's checkpoints, oldest first.
func (c *Client) ListCheckpoints(ctx context.Context, id string) ([]Checkpoint, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var out struct {
		Checkpoints []Checkpoint `json:"checkpoints"`
	}
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "checkpoints")}, &out)
	return out.Checkpoints, err
}

// DiffCheckpoint lists what changed in sandbox id's files since
// checkpoint cp; with path, that file's unified diff.
func (c *Client) DiffCheckpoint(ctx context.Context, id, cp, path string) (CheckpointDiff, error) {
	var out CheckpointDiff
	if err := checkID(id); err != nil {
		return out, err
	}
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "checkpoints", url.PathEscape(cp), "diff"), query: q}, &out)
	return out, err
}

// RollbackCheckpoint brings sandbox id back to checkpoint cp; a running
// sandbox restarts for it.
func (c *Client) RollbackCheckpoint(ctx context.Context, id, cp string, req RollbackRequest) (Sandbox, error) {
	var out Sandbox
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "checkpoints", url.PathEscape(cp), "rollback"), json: req}, &out)
	return out, err
}

// DeleteCheckpoint deletes checkpoint cp of sandbox id.
func (c *Client) DeleteCheckpoint(ctx context.Context, id, cp string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id, "checkpoints", url.PathEscape(cp))}, nil)
}
