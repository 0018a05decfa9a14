package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Secret scopes.
const (
	ScopeWorkspace = "workspace" // shared by the workspace
	ScopeUser      = "user"      // one user's own; wins over the workspace's of its name
)

// How a secret reaches a sandbox.
const (
	InjectEnv   = "env"   // an environment variable of each command
	InjectProxy = "proxy" // a placeholder, swapped for the value by the daemon on its hosts
)

// Secret is a secret as listed: never its value.
type Secret struct {
	Name        string `json:"name"`
	Workspace   string `json:"workspace"`
	Scope       string `json:"scope"`
	User        string `json:"user,omitempty"`
	Description string `json:"description,omitempty"`
	Inject      string `json:"inject"`
	// Hosts, Query and Placeholder are a proxy secret's: the hosts whose
	// connections get the value, whether in query strings too, and what
	// the sandbox's variable holds instead of the value.
	Hosts       []string  `json:"hosts,omitempty"`
	Query       bool      `json:"query,omitempty"`
	Placeholder string    `json:"placeholder,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Secrets is the body of GET /v1/secrets.
type Secrets struct {
	Secrets []Secret `json:"secrets"`
}

// SetSecretRequest is the body of POST /v1/secrets.
type SetSecretRequest struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Scope is ScopeWorkspace (the default) or ScopeUser, for User (or
	// the Hutch-User header).
	Scope       string `json:"scope,omitempty"`
	User        string `json:"user,omitempty"`
	Description string `json:"description,omitempty"`
	// Inject is InjectEnv (the default) or InjectProxy, with Hosts.
	Inject string   `json:"inject,omitempty"`
	Hosts  []string `json:"hosts,omitempty"`
	Query  bool     `json:"query,omitempty"`
}

// SetSecret sets a secret (made, or its value and settings replaced).
func (c *Client) SetSecret(ctx context.Context, req SetSecretRequest) (*Secret, error) {
	var out Secret
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/secrets", json: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSecrets lists the secrets the caller sees (never their values).
func (c *Client) ListSecrets(ctx context.Context) ([]Secret, error) {
	var out Secrets
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/secrets"}, &out); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}

// DeleteSecret removes the workspace's secret name, or with user the
// personal one of that user.
func (c *Client) DeleteSecret(ctx context.Context, name, user string) error {
	q := url.Values{}
	if user != "" {
		q.Set("scope", ScopeUser)
		q.Set("user", user)
	}
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/secrets/" + url.PathEscape(name), query: q}, nil)
}

// RotateMaster re-encrypts every secret under a new master key (the
// daemon's own key only).
func (c *Client) RotateMaster(ctx context.Context) error {
	return c.call(ctx, request{method: http.MethodPost, path: "/v1/secrets/rotate-master"}, nil)
}
