package store

import (
	"context"
	"time"
)

// Workspaces keeps the workspaces (tenants), their quotas and the
// sandbox time they used each day.
type Workspaces interface {
	// EnsureWorkspace records workspace name if it is not yet, with no
	// quota; it returns the record either way.
	EnsureWorkspace(ctx context.Context, name string, at time.Time) (*Workspace, error)
	// GetWorkspace returns one; ErrNotFound if absent.
	GetWorkspace(ctx context.Context, name string) (*Workspace, error)
	// ListWorkspaces returns every workspace, by name.
	ListWorkspaces(ctx context.Context) ([]*Workspace, error)
	// SetQuota sets a workspace's quota (made if absent).
	SetQuota(ctx context.Context, name string, q Quota, at time.Time) error
	// AddSandboxTime adds d of sandbox time to workspace ws's day (a
	// UTC date, 2006-01-02).
	AddSandboxTime(ctx context.Context, ws, day string, d time.Duration) error
	// SandboxTime is the sandbox time workspace ws used on day.
	SandboxTime(ctx context.Context, ws, day string) (time.Duration, error)
}

// Workspace is a tenant: its keys, sandboxes, volumes, templates and
// secrets are its own.
type Workspace struct {
	Name      string
	Quota     Quota
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Quota bounds what a workspace's sandboxes use together. A zero field
// is no bound.
type Quota struct {
	// Sandboxes bounds those running (or paused, or on their way there).
	Sandboxes int `json:"sandboxes,omitempty"`
	// MemoryMB and CPUs bound the limits of those running, summed.
	MemoryMB int64   `json:"memory_mb,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
	// DiskMB bounds the disk limits of all its sandboxes, suspended and
	// stopped ones too: their files are kept.
	DiskMB int64 `json:"disk_mb,omitempty"`
	// SandboxHours bounds the hours its sandboxes run in one UTC day.
	SandboxHours float64 `json:"sandbox_hours,omitempty"`
}

// Audit keeps the audit log: append-only.
type Audit interface {
	// AppendAudit records entries, in one transaction, setting their IDs.
	AppendAudit(ctx context.Context, entries ...*AuditEntry) error
	// ListAudit returns entries newest first, as f narrows them.
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
}

// AuditEntry is one call that changed state or read a file or a
// secret's existence. It never holds a secret's value or a file's
// content: only who, what, on which object, and how it ended.
type AuditEntry struct {
	ID   int64
	Time time.Time
	// Key is the API key's name; "" for the administrator (the daemon's
	// own key or its unix socket).
	Key       string
	Workspace string
	// User is the product's user the call was for, when it named one.
	User string
	// Action is the route: "POST /v1/sandboxes/{id}/exec".
	Action string
	// Object is what it acted on: a sandbox id, a volume, a secret's
	// name, a file's path.
	Object string
	// Status is the HTTP status of the answer, Code its error code ("" on
	// success).
	Status int
	Code   string
}

// AuditFilter narrows ListAudit: Workspace "" is every workspace;
// Before, when not 0, lists entries older than that ID (the next page);
// Limit bounds the count.
type AuditFilter struct {
	Workspace string
	Before    int64
	Limit     int
}
