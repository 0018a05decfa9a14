package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Health reports whether the daemon is up and which backends it can use.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/health"}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// CreateSandbox creates and starts a sandbox.
func (c *Client) CreateSandbox(ctx context.Context, req CreateSandboxRequest) (*Sandbox, error) {
	var sb Sandbox
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/sandboxes", json: req}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// ListSandboxes returns every sandbox, oldest first.
func (c *Client) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	var out struct {
		Sandboxes []Sandbox `json:"sandboxes"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/sandboxes"}, &out); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}

// GetSandbox returns one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id)}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// DeleteSandbox stops a sandbox and removes it with its files.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id)}, nil)
}

// Stats returns what a running sandbox uses.
func (c *Client) Stats(ctx context.Context, id string) (*SandboxStats, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var st SandboxStats
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id) + "/stats"}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// SandboxMetrics returns what a sandbox used over time: its samples taken
// after since (all it keeps when since is zero), oldest first.
func (c *Client) SandboxMetrics(ctx context.Context, id string, since time.Time) (*SandboxMetrics, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	var m SandboxMetrics
	if err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id) + "/metrics", query: q}, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// PauseSandbox freezes a running sandbox: its processes keep their memory
// and get no CPU. Any call that needs it (exec, files) thaws it first.
func (c *Client) PauseSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "pause")
}

// UnpauseSandbox thaws a paused sandbox.
func (c *Client) UnpauseSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "unpause")
}

// SuspendSandbox stops a sandbox so that it uses no memory and no CPU,
// keeping its files; under gVisor its memory and processes too, under runc
// they are gone. Any call that needs it (exec, code, files) resumes it
// first.
func (c *Client) SuspendSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "suspend")
}

// ResumeSandbox starts a suspended or stopped sandbox again.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "resume")
}

// StopSandbox ends a sandbox's processes, keeping its files only; unlike a
// suspended one, a stopped sandbox is not woken by calls: StartSandbox
// starts it.
func (c *Client) StopSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "stop")
}

// StartSandbox starts a stopped (or suspended) sandbox again.
func (c *Client) StartSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "start")
}

func (c *Client) sandboxAction(ctx context.Context, id, action string) (*Sandbox, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id) + "/" + action}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// UpdateSandbox sets a sandbox's idle timeout, counted from now, and
// optionally its idle action: a keepalive.
func (c *Client) UpdateSandbox(ctx context.Context, id string, req UpdateSandboxRequest) (*Sandbox, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := c.call(ctx, request{method: http.MethodPatch, path: sandboxPath(id), json: req}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// SnapshotSandbox makes a snapshot of sandbox id's files as they are now:
// a template (source "snapshot") that CreateSandboxRequest.FromSnapshot,
// or Template, starts new sandboxes from. It wakes a suspended sandbox;
// a running one is frozen for the copy.
func (c *Client) SnapshotSandbox(ctx context.Context, id, name string) (*Template, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var t Template
	if err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "snapshot"), json: SnapshotRequest{Name: name}}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ForkSandbox makes count new sandboxes from sandbox id's files as they are
// now, with its runtime, limits, env and timers. When some copies failed
// it returns those made and an error saying why the others were not.
func (c *Client) ForkSandbox(ctx context.Context, id string, count int) ([]Sandbox, error) {
	res, err := c.Fork(ctx, id, count)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range res.Errors {
		errs = append(errs, &Error{StatusCode: http.StatusCreated, Code: e.Code, Message: fmt.Sprintf("copy %d of %d: %s", e.Copy, count, e.Message)})
	}
	return res.Sandboxes, errors.Join(errs...)
}

// Fork makes count copies of sandbox id, each its own sandbox; a copy
// that failed is in Errors, and the call fails only when none was made.
func (c *Client) Fork(ctx context.Context, id string, count int) (ForkResult, error) {
	var out ForkResult
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "fork"), json: ForkRequest{Count: count}}, &out)
	return out, err
}
