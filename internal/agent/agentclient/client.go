// Package agentclient is the daemon's typed client of the in-sandbox agent
// (internal/agent). It speaks Connect over HTTP/1.1 on whatever connection
// the backend's DialAgent gives, and turns the agent's errors into
// internal/errdefs kinds.
package agentclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/tools"
)

// baseURL is the agent's URL; the host part is never resolved, dial decides
// where requests go.
const baseURL = "http://agent"

// Request headers the agent understands on Process.Start, beyond envd's.
const (
	headerTimeout   = "Hutch-Timeout-Ms"
	headerKillGrace = "Hutch-Kill-Grace-Ms"
)

// Client talks to one agent. It is safe for concurrent use. Errors from
// Process and Filesystem calls, including those a stream's Err reports, are
// errdefs kinds: connect codes NotFound, InvalidArgument, AlreadyExists,
// FailedPrecondition, ResourceExhausted and Unimplemented map to the kinds of
// those names, PermissionDenied to FailedPrecondition ("permission denied:
// …"), Unavailable and transport failures to Unavailable; cancellation keeps
// wrapping the context's error; anything else is an internal error.
type Client struct {
	Process    processconnect.ProcessClient
	Filesystem filesystemconnect.FilesystemClient

	http      *http.Client
	transport *http.Transport
}

// New returns a client whose connections are made by dial (HTTP/1.1 with
// keep-alive; several requests may each hold a connection, e.g. streams).
func New(dial func(ctx context.Context) (net.Conn, error)) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx)
		},
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	hc := &http.Client{Transport: tr}
	opts := []connect.ClientOption{
		connect.WithInterceptors(errorInterceptor{}),
		// The agent is on the same host: compressing its answers only costs
		// (setting up a gzip writer per message showed in exec profiles).
		connect.WithAcceptCompression("gzip", nil, nil),
	}
	return &Client{
		Process:    processconnect.NewProcessClient(hc, baseURL, opts...),
		Filesystem: filesystemconnect.NewFilesystemClient(hc, baseURL, opts...),
		http:       hc,
		transport:  tr,
	}
}

// CloseIdleConnections closes the connections no request is using.
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// WithUser makes req act as user inside the sandbox (envd's Basic
// authorization header with an empty password). An empty user leaves the
// agent's default user.
func WithUser[T any](req *connect.Request[T], user string) *connect.Request[T] {
	if user != "" {
		req.Header().Set("Authorization", basicAuth(user))
	}
	return req
}

// WithTimeout makes the agent end the process a Start request starts after
// timeout: SIGTERM, then after grace SIGKILL to its whole process tree; the
// EndEvent then carries error "timeout". A negative grace keeps the agent's
// default (2s); 0 kills at once.
func WithTimeout[T any](req *connect.Request[T], timeout, grace time.Duration) *connect.Request[T] {
	req.Header().Set(headerTimeout, strconv.FormatInt(max(timeout.Milliseconds(), 1), 10))
	if grace >= 0 {
		req.Header().Set(headerKillGrace, strconv.FormatInt(grace.Milliseconds(), 10))
	}
	return req
}

func basicAuth(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// Health reports whether the agent answers.
func (c *Client) Health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/health", nil)
	if err != nil {
		return fmt.Errorf("agent health: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return errdefs.Unavailable("agent unhealthy: %s", resp.Status)
	}
	return nil
}

// ReadFile returns the content of the file at path, relative paths being
// relative to user's home ("" for the agent's default user). The caller
// closes the reader.
func (c *Client) ReadFile(ctx context.Context, path, user string) (io.ReadCloser, error) {
	return c.get(ctx, filesURL(path, user))
}

// Archive streams directory path packed as format (tools.FormatTarGz or
// tools.FormatZip), as user sees it. The caller must close it.
func (c *Client) Archive(ctx context.Context, path, format, user string) (io.ReadCloser, error) {
	q := url.Values{"path": {path}, "format": {format}}
	if user != "" {
		q.Set("username", user)
	}
	return c.get(ctx, baseURL+"/archive?"+q.Encode())
}

// get answers the body of a GET of the agent's url, to be closed.
func (c *Client) get(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("get from the agent: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, httpError(resp)
	}
	return resp.Body, nil
}

// WrittenFile is what WriteFile wrote.
type WrittenFile struct {
	Name string // base name
	Path string // absolute path inside the sandbox
}

// WriteFile replaces the file at path with the content of r, atomically,
// creating parent directories; the file and new directories belong to user.
func (c *Client) WriteFile(ctx context.Context, path, user string, r io.Reader) (*WrittenFile, error) {
	var written []WrittenFile
	if err := c.post(ctx, filesURL(path, user), "application/octet-stream", r, &written); err != nil {
		return nil, err
	}
	if len(written) != 1 {
		return nil, fmt.Errorf("write %s: unexpected answer from agent (%d files)", path, len(written))
	}
	return &written[0], nil
}

// RunTool runs file tool name (package tools) in the sandbox, with its
// JSON arguments, acting for user, relative paths in dir. It returns the
// tool's JSON result, or its failure as a *tools.Error.
func (c *Client) RunTool(ctx context.Context, name string, args json.RawMessage, dir, user string) (json.RawMessage, error) {
	q := url.Values{"cwd": {dir}}
	if user != "" {
		q.Set("username", user)
	}
	var answer tools.Answer
	if err := c.post(ctx, baseURL+"/tools/"+url.PathEscape(name)+"?"+q.Encode(), "application/json", bytes.NewReader(args), &answer); err != nil {
		return nil, err
	}
	if answer.Error != nil {
		return nil, answer.Error
	}
	return answer.Result, nil
}

// post sends body to the agent's url and decodes its JSON answer into out.
// The agent's errors come back with their errdefs kind and message.
func (c *Client) post(ctx context.Context, url, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return fmt.Errorf("post to the agent: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpError(resp)
	}
	if err := decodeJSON(resp.Body, out); err != nil {
		return fmt.Errorf("unexpected answer from the agent to %s: %w", req.URL.Path, err)
	}
	return nil
}

func filesURL(path, user string) string {
	q := url.Values{"path": {path}}
	if user != "" {
		q.Set("username", user)
	}
	return baseURL + "/files?" + q.Encode()
}
