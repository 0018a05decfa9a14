// Package client is the Go SDK for the Hutch daemon's REST API
// (api/openapi.yaml). The hutch CLI uses it too.
//
//	c, err := client.FromEnv()
//	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{})
//	res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: "echo hi"})
//
// Every method takes a context, which bounds the whole call including reading
// a streamed body; the Client itself sets no timeout because exec streams and
// file transfers can be long. A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Defaults used by FromEnv.
const (
	DefaultSocket  = "/run/hutch/hutch.sock"
	DefaultURL     = "http://127.0.0.1:7070"
	DefaultDataDir = "/var/lib/hutch"
)

// Client talks to one Hutch daemon.
type Client struct {
	base      *url.URL // scheme and host of every request; http://hutch for a unix socket
	target    string   // what the user gave, for messages
	apiKey    string
	http      *http.Client
	userAgent string
	// user and workspace are sent as Hutch-User and Hutch-Workspace.
	user, workspace string
}

// CloseIdleConnections closes the connections kept open for the next
// call; the next call opens a new one.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc. For a unix
// socket URL, hc's transport must dial the socket itself.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithUser names the product's user every call is for (the Hutch-User
// header): whose personal secrets commands get, recorded in the audit
// log.
func WithUser(user string) Option {
	return func(c *Client) { c.user = user }
}

// WithWorkspace names the workspace the daemon's own key acts in (the
// Hutch-Workspace header); another key acts in its own only.
func WithWorkspace(ws string) Option {
	return func(c *Client) { c.workspace = ws }
}

// New returns a Client for the daemon at baseURL: "http://host:port",
// "https://host:port", "unix:///path/to/socket", or "host:port" for http. apiKey is sent as a bearer
// token; it may be empty on a unix socket, which needs none.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL // host:port
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("hutch URL %q: %w", baseURL, err)
	}
	c := &Client{target: baseURL, apiKey: apiKey, userAgent: "hutch-go-client"}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("hutch URL %q: no host", baseURL)
		}
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("hutch URL %q: must not have a path", baseURL)
		}
		c.base = &url.URL{Scheme: u.Scheme, Host: u.Host}
		c.http = &http.Client{Transport: newTransport(nil)}
	case "unix":
		sock := u.Path
		if sock == "" {
			sock = u.Opaque // unix:relative/path
		}
		if sock == "" {
			return nil, fmt.Errorf("hutch URL %q: no socket path", baseURL)
		}
		c.base = &url.URL{Scheme: "http", Host: "hutch"}
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		c.http = &http.Client{Transport: newTransport(dial)}
	default:
		return nil, fmt.Errorf("hutch URL %q: scheme must be http, https or unix", baseURL)
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func newTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if dial != nil {
		t.DialContext = dial
		t.Proxy = nil
	}
	return t
}

// FromEnv returns a Client configured the way the hutch CLI finds its daemon:
//
//   - the URL is $HUTCH_URL if set; otherwise the unix socket
//     /run/hutch/hutch.sock if it exists and this process may connect to it;
//     otherwise http://127.0.0.1:7070;
//   - the key is $HUTCH_API_KEY if set; otherwise the content of api.key in
//     the data directory ($HUTCH_DATA_DIR, default /var/lib/hutch) when it is
//     readable; otherwise none;
//   - $HUTCH_USER, if set, names the product's user every call is for
//     (WithUser), and $HUTCH_WORKSPACE the workspace the daemon's own key
//     acts in (WithWorkspace).
func FromEnv(opts ...Option) (*Client, error) {
	return fromEnv(os.LookupEnv, DefaultSocket, opts...)
}

func fromEnv(lookup func(string) (string, bool), socket string, opts ...Option) (*Client, error) {
	base, ok := lookup("HUTCH_URL")
	if !ok || base == "" {
		base = DefaultURL
		if fi, err := os.Stat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 && canConnect(socket) {
			base = "unix://" + socket
		}
	}
	key, ok := lookup("HUTCH_API_KEY")
	if !ok || key == "" {
		dir, ok := lookup("HUTCH_DATA_DIR")
		if !ok || dir == "" {
			dir = DefaultDataDir
		}
		// #nosec G304 -- the key file is where the operator configured it
		if b, err := os.ReadFile(filepath.Join(dir, "api.key")); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	var env []Option
	if u, ok := lookup("HUTCH_USER"); ok && u != "" {
		env = append(env, WithUser(u))
	}
	if ws, ok := lookup("HUTCH_WORKSPACE"); ok && ws != "" {
		env = append(env, WithWorkspace(ws))
	}
	return New(base, key, append(env, opts...)...)
}

// URL returns the daemon address the Client was made with.
func (c *Client) URL() string { return c.target }

// request is one API call.
type request struct {
	method string
	path   string // already escaped
	query  url.Values
	accept string
	// Exactly one of json and body, or neither.
	json        any
	body        io.Reader
	contentType string
}

// do sends r and returns the response when its status is 2xx; otherwise it
// closes the body and returns the decoded *Error.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	u := *c.base
	u.RawPath = r.path
	u.Path, _ = url.PathUnescape(r.path)
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	body, ctype := r.body, r.contentType
	if r.json != nil {
		b, err := json.Marshal(r.json)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", r.method, r.path, err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	if rc, ok := body.(io.ReadCloser); ok {
		// The transport closes a ReadCloser body; the caller's file is not
		// ours to close.
		body = struct{ io.Reader }{rc}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	for k, v := range c.headers() {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, ctxErr
		}
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer func() { _ = resp.Body.Close() }()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// headers are what every request carries: the key, and who it is for.
func (c *Client) headers() http.Header {
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	if c.user != "" {
		h.Set("Hutch-User", c.user)
	}
	if c.workspace != "" {
		h.Set("Hutch-Workspace", c.workspace)
	}
	return h
}

// call sends r and decodes a JSON response into out (unless out is nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode response of %s %s: %w", r.method, r.path, err)
	}
	return nil
}

// checkID rejects an empty sandbox ID, which would address another route.
func checkID(id string) error {
	if id == "" {
		return errors.New("empty sandbox ID")
	}
	return nil
}

func sandboxPath(id string, rest ...string) string {
	p := "/v1/sandboxes/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}
