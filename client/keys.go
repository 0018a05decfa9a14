package client

import (
	"context"
	"net/http"
	"net/url"
)

// CreateAPIKey makes an API key whose tool calls may use toolsMode or a
// more isolated sandbox mode ("" for all). Only the daemon's own key may;
// the returned key's Key is shown this once.
func (c *Client) CreateAPIKey(ctx context.Context, name, toolsMode string) (*APIKey, error) {
	return c.CreateAPIKeyWith(ctx, CreateAPIKeyRequest{Name: name, ToolsMode: toolsMode})
}

// CreateAPIKeyWith makes an API key as req says (its network mode too).
func (c *Client) CreateAPIKeyWith(ctx context.Context, req CreateAPIKeyRequest) (*APIKey, error) {
	var k APIKey
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/keys", json: req}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListAPIKeys returns the API keys, without their secrets.
func (c *Client) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	var out struct {
		Keys []APIKey `json:"keys"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/keys"}, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// DeleteAPIKey removes an API key: it works no more.
func (c *Client) DeleteAPIKey(ctx context.Context, name string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/keys/" + url.PathEscape(name)}, nil)
}
