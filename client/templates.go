package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// ListTemplates returns every template, the built-in host first.
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var out struct {
		Templates []Template `json:"templates"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/templates"}, &out); err != nil {
		return nil, err
	}
	return out.Templates, nil
}

// GetTemplate returns one template.
func (c *Client) GetTemplate(ctx context.Context, name string) (*Template, error) {
	var t Template
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/templates/" + url.PathEscape(name)}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// DeleteTemplate removes a template that no sandbox uses.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/v1/templates/" + url.PathEscape(name)}, nil)
}

// BuildTemplate builds a template and returns it once it is ready. A build
// takes minutes; progress, if not nil, hears each step as it happens.
// Cancelling ctx stops the build, and nothing of it is kept.
func (c *Client) BuildTemplate(ctx context.Context, req BuildTemplateRequest, progress func(BuildProgress)) (*Template, error) {
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/templates", json: req, accept: "text/event-stream"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" {
		var t Template
		if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
			return nil, fmt.Errorf("build template: decode response: %w", err)
		}
		return &t, nil
	}
	if mt != "text/event-stream" {
		return nil, fmt.Errorf("build template: unexpected response content type %q", mt)
	}
	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.nextBefore(ctx, "build stream ended before the build did")
		if err != nil {
			return nil, err
		}
		switch ev.name {
		case "progress":
			var p BuildProgress
			if err := json.Unmarshal(ev.data, &p); err != nil {
				return nil, fmt.Errorf("build template: decode progress event: %w", err)
			}
			if progress != nil {
				progress(p)
			}
		case "template":
			var t Template
			if err := json.Unmarshal(ev.data, &t); err != nil {
				return nil, fmt.Errorf("build template: decode template event: %w", err)
			}
			return &t, nil
		case "error":
			return nil, decodeErrorEvent(ev.data)
		}
		// Other events are reserved for later use; ignore them.
	}
}

// ImportTemplate makes template name from an image archive read from r: a
// docker-archive (docker save) or an OCI image layout in a tar.
func (c *Client) ImportTemplate(ctx context.Context, name string, archive io.Reader) (*Template, error) {
	var t Template
	r := request{method: http.MethodPost, path: "/v1/templates/" + url.PathEscape(name) + "/import", body: archive, contentType: "application/x-tar"}
	if err := c.call(ctx, r, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
