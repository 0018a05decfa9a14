package client

import (
	"context"
	"net/http"
	"net/url"
)

// ListTools returns the sandbox tool catalogue: each tool's name, a
// description written for a model, and the JSON schema of its arguments.
func (c *Client) ListTools(ctx context.Context) ([]Tool, error) {
	var out struct {
		Tools []Tool `json:"tools"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/tools"}, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// RunTool calls tool name in sandbox id with its arguments: a value that
// marshals to a JSON object (a json.RawMessage is sent as it is). A tool's own failure is a result of
// Status ToolError, not an error: it is for the model to read.
func (c *Client) RunTool(ctx context.Context, id, name string, args any, opts ...ToolOption) (*ToolResult, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, o := range opts {
		o(q)
	}
	var res ToolResult
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "tools", url.PathEscape(name)), query: q, json: args}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// ToolOption changes how a tool call runs.
type ToolOption func(url.Values)

// InMode runs a tool call in a sandbox mode: "all" (every call in the
// sandbox), "selective" (only risky calls in it, the rest on the host) or
// "off" (all on the host), as the daemon allows.
func InMode(mode string) ToolOption {
	return func(q url.Values) { q.Set("mode", mode) }
}
