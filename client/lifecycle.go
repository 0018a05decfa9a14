package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// EventFilter narrows ListEvents: the events after ID After, of
// Workspace (the administrator's; "": every one), of SandboxID, at most
// Limit (default 100, at most 1000).
type EventFilter struct {
	After     int64
	Workspace string
	SandboxID string
	Limit     int
}

// ListEvents returns the sandboxes' lifecycle events, oldest first: the
// caller's workspace's.
func (c *Client) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	q := url.Values{}
	if f.After > 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Workspace != "" {
		q.Set("workspace", f.Workspace)
	}
	if f.SandboxID != "" {
		q.Set("sandbox", f.SandboxID)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out Events
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/events", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// CreateWebhook has the caller's workspace's events posted to a URL; the
// answer holds its secret, which no later call tells.
func (c *Client) CreateWebhook(ctx context.Context, req CreateWebhookRequest) (*Webhook, error) {
	var wh Webhook
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/webhooks", json: req}, &wh); err != nil {
		return nil, err
	}
	return &wh, nil
}

// ListWebhooks returns the caller's workspace's webhooks, without secrets.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out []Webhook
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/webhooks"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteWebhook stops posting events to a webhook.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/webhooks/" + url.PathEscape(id)}, nil)
}

// WebhookDeliveries returns a webhook's latest delivery attempts, newest
// first.
func (c *Client) WebhookDeliveries(ctx context.Context, id string) ([]WebhookDelivery, error) {
	var out []WebhookDelivery
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/webhooks/" + url.PathEscape(id) + "/deliveries"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}
