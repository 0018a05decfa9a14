package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Quota bounds what a workspace's sandboxes use together; 0 is no bound.
type Quota struct {
	// Sandboxes bounds those running (or paused).
	Sandboxes int `json:"sandboxes,omitempty"`
	// MemoryMB and CPUs bound the limits of those running, summed.
	MemoryMB int64   `json:"memory_mb,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
	// DiskMB bounds the disk limits of all its sandboxes, suspended and
	// stopped ones too.
	DiskMB int64 `json:"disk_mb,omitempty"`
	// SandboxHours bounds the hours its sandboxes run in one UTC day.
	SandboxHours float64 `json:"sandbox_hours,omitempty"`
}

// Workspace is a tenant of the daemon.
type Workspace struct {
	Name      string    `json:"name"`
	Quota     Quota     `json:"quota"`
	CreatedAt time.Time `json:"created_at"`
}

// Workspaces is the body of GET /v1/workspaces.
type Workspaces struct {
	Workspaces []Workspace `json:"workspaces"`
}

// WorkspaceUsage is what a workspace's sandboxes use, beside its quota.
type WorkspaceUsage struct {
	Workspace string `json:"workspace"`
	Quota     Quota  `json:"quota"`
	// Sandboxes, MemoryMB and CPUs are those of its running (or paused)
	// sandboxes.
	Sandboxes int     `json:"sandboxes"`
	MemoryMB  int64   `json:"memory_mb"`
	CPUs      float64 `json:"cpus"`
	// DiskMB is the disk limits of all its sandboxes.
	DiskMB int64 `json:"disk_mb"`
	// SandboxHours is the sandbox time of Day (UTC, 2006-01-02) so far.
	SandboxHours float64 `json:"sandbox_hours"`
	Day          string  `json:"day"`
}

// AuditEntry is one call in the audit log.
type AuditEntry struct {
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	// Key is the API key's name; "" for the daemon's own.
	Key       string `json:"key"`
	Workspace string `json:"workspace"`
	User      string `json:"user,omitempty"`
	// Action is the route called, "POST /v1/sandboxes/{id}/exec".
	Action string `json:"action"`
	// Object is what it acted on: a sandbox's id, a name, a file's path.
	Object string `json:"object"`
	// Status is the answer's HTTP status, Code its error code.
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
}

// AuditLog is the body of GET /v1/audit: newest first.
type AuditLog struct {
	Entries []AuditEntry `json:"entries"`
}

// ListWorkspaces lists the workspaces the caller sees: all for the
// daemon's own key, its own for another.
func (c *Client) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	var out Workspaces
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/workspaces"}, &out); err != nil {
		return nil, err
	}
	return out.Workspaces, nil
}

// Whoami returns who the daemon takes the client's key for, and the
// defaults of what it makes.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var out Whoami
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/whoami"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkspaceUsage returns a workspace's usage and quota.
func (c *Client) WorkspaceUsage(ctx context.Context, ws string) (*WorkspaceUsage, error) {
	var out WorkspaceUsage
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/workspaces/" + url.PathEscape(ws) + "/usage"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetQuota sets a workspace's quota (the daemon's own key only).
func (c *Client) SetQuota(ctx context.Context, ws string, q Quota) (*WorkspaceUsage, error) {
	var out WorkspaceUsage
	if err := c.call(ctx, request{method: http.MethodPut, path: "/v1/workspaces/" + url.PathEscape(ws) + "/quota", json: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditFilter narrows ListAudit: Workspace (the daemon's own key only),
// Before (an entry's ID: the entries older than it) and Limit.
type AuditFilter struct {
	Workspace string
	Before    int64
	Limit     int
}

// ListAudit returns audit entries, newest first.
func (c *Client) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	q := url.Values{}
	if f.Workspace != "" {
		q.Set("workspace", f.Workspace)
	}
	if f.Before > 0 {
		q.Set("before", strconv.FormatInt(f.Before, 10))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out AuditLog
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/audit", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}
