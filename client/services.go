package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Services: a background process with a port is a service, what a
// preview pane shows, with a status it can show live.

// Service statuses.
const (
	ServiceStarting  = "starting" // until its port accepts a connection
	ServiceRunning   = "running"
	ServiceSuspended = "suspended" // with its sandbox; a request to its preview wakes both
	ServiceStopped   = "stopped"   // by request, or with its stopped sandbox
	ServiceError     = "error"     // it ended by itself: ExitCode and LogTail say how
)

// StartServiceRequest starts a service.
type StartServiceRequest struct {
	// Name finds it again; default: made from the command.
	Name string `json:"name,omitempty"`
	// Exactly one of Cmd (an argv) and Command (run by /bin/sh -c).
	Cmd     []string          `json:"cmd,omitempty"`
	Command string            `json:"command,omitempty"`
	Port    int               `json:"port"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	User    string            `json:"user,omitempty"`
	// Public: its preview answers without a key or a link.
	Public bool `json:"public,omitempty"`
	// Slot is the pane it fills: "preview" for a product's one preview.
	Slot string `json:"slot,omitempty"`
	// Replace stops and deletes the sandbox's other services of the same
	// slot first; nil means true in the "preview" slot.
	Replace *bool `json:"replace,omitempty"`
}

// Service is a service of a sandbox.
type Service struct {
	Process
	Public bool   `json:"public,omitempty"`
	Slot   string `json:"slot,omitempty"`
	// Since is when its status was first seen.
	Since time.Time `json:"since"`
	// ExitCode and LogTail tell an error: how it ended, its last lines.
	ExitCode *int   `json:"exit_code,omitempty"`
	LogTail  string `json:"log_tail,omitempty"`
	// PreviewURL is its preview by host ({port}-{id}.{domain}), when the
	// daemon routes by host; PathURL by path. Both answer the API key, a
	// link's cookie (ServiceLink), or anyone when Public.
	PreviewURL string `json:"preview_url,omitempty"`
	PathURL    string `json:"path_url,omitempty"`
}

// ServiceLinkRequest asks for a preview link; ExpiresInS defaults to an
// hour, at most 7 days.
type ServiceLinkRequest struct {
	ExpiresInS int `json:"expires_in_s,omitempty"`
}

// ServiceLink is a URL of a service's preview that opens without the API
// key until it expires: its first visit sets a cookie for that preview
// and redirects to the clean URL.
type ServiceLink struct {
	URL       string    `json:"url"`
	PathURL   string    `json:"path_url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ServiceLink makes a preview link of a service.
func (c *Client) ServiceLink(ctx context.Context, id, name string, expiresIn time.Duration) (*ServiceLink, error) {
	var out ServiceLink
	req := ServiceLinkRequest{ExpiresInS: int(expiresIn.Seconds())}
	if err := c.serviceCall(ctx, id, "/"+url.PathEscape(name)+"/link", http.MethodPost, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeServiceLinks revokes every preview link made for a service until
// now, by URL or by the cookie its first visit set; links made later
// work.
func (c *Client) RevokeServiceLinks(ctx context.Context, id, name string) error {
	return c.serviceCall(ctx, id, "/"+url.PathEscape(name)+"/link", http.MethodDelete, nil, nil)
}

// StartService starts a service in sandbox id (waking it); it is
// starting until its port accepts.
func (c *Client) StartService(ctx context.Context, id string, req StartServiceRequest) (*Service, error) {
	var out Service
	if err := c.serviceCall(ctx, id, "", http.MethodPost, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListServices lists a sandbox's services without waking it.
func (c *Client) ListServices(ctx context.Context, id string) ([]Service, error) {
	var out struct {
		Services []Service `json:"services"`
	}
	if err := c.serviceCall(ctx, id, "", http.MethodGet, nil, &out); err != nil {
		return nil, err
	}
	return out.Services, nil
}

// GetService returns one service without waking its sandbox.
func (c *Client) GetService(ctx context.Context, id, name string) (*Service, error) {
	return c.serviceAction(ctx, id, name, http.MethodGet, "")
}

// RestartService stops a service and starts it again with the same
// command and env (a reload that picks up edited code).
func (c *Client) RestartService(ctx context.Context, id, name string) (*Service, error) {
	return c.serviceAction(ctx, id, name, http.MethodPost, "/restart")
}

// StopService stops a service; it stays stopped until restarted.
func (c *Client) StopService(ctx context.Context, id, name string) (*Service, error) {
	return c.serviceAction(ctx, id, name, http.MethodPost, "/stop")
}

// DeleteService kills a service and forgets it.
func (c *Client) DeleteService(ctx context.Context, id, name string) error {
	return c.serviceCall(ctx, id, "/"+url.PathEscape(name), http.MethodDelete, nil, nil)
}

func (c *Client) serviceAction(ctx context.Context, id, name, method, action string) (*Service, error) {
	var out Service
	if err := c.serviceCall(ctx, id, "/"+url.PathEscape(name)+action, method, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) serviceCall(ctx context.Context, id, rest, method string, body, out any) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: method, path: sandboxPath(id, "services") + rest, json: body}, out)
}

// ServiceEvents calls fn with the service as it is, then at each change
// of its status, until ctx ends (then it returns nil) or fn fails.
func (c *Client) ServiceEvents(ctx context.Context, id, name string, fn func(Service) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	return followEvents(ctx, c, request{method: http.MethodGet, path: sandboxPath(id, "services") + "/" + url.PathEscape(name) + "/events"}, "service events", "status", fn)
}

// ScreenshotRequest asks for a screenshot of a service's page.
type ScreenshotRequest struct {
	// Path is the page's path on the service, with its query; default /.
	Path string `json:"path,omitempty"`
	// Width and Height are the browser window's, in pixels; default
	// 1280×800.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// FullPage takes the whole page, beyond the window; Clip only a
	// rectangle of it. Not both.
	FullPage bool  `json:"full_page,omitempty"`
	Clip     *Clip `json:"clip,omitempty"`
}

// Clip is a rectangle of a page, in pixels from its top left corner.
type Clip struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Screenshot returns a PNG of a service's page, rendered by a browser in
// a sandbox of the workspace's own (made from the browser template the
// first time) that reaches nothing but the service's sandbox.
func (c *Client) Screenshot(ctx context.Context, id, name string, req ScreenshotRequest) ([]byte, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, request{
		method: http.MethodPost, path: sandboxPath(id, "services") + "/" + url.PathEscape(name) + "/screenshot",
		json: req, accept: "image/png",
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}
