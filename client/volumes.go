package client

import (
	"context"
	"net/http"
	"net/url"
)

// CreateVolume makes an empty named volume, which sandboxes mount with
// CreateSandboxRequest.Volumes and which outlives them.
func (c *Client) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	var v Volume
	body := struct {
		Name string `json:"name"`
	}{name}
	if err := c.call(ctx, request{method: http.MethodPost, path: "/v1/volumes", json: body}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListVolumes lists the volumes and the sandboxes that mount them.
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	var out struct {
		Volumes []Volume `json:"volumes"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/volumes"}, &out); err != nil {
		return nil, err
	}
	return out.Volumes, nil
}

// DeleteVolume deletes a volume and its files; one a sandbox mounts is a
// conflict (IsConflict).
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/volumes/" + url.PathEscape(name)}, nil)
}
