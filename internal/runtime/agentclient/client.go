// Package agentclient is the daemon's typed client of the in-sandbox agent
// (internal/agent). It speaks Connect over HTTP/1.1 on whatever connection
// the backend's DialAgent gives: Hutch's own service hutch.agent.v1 for
// commands, their logs and signals, file tools, archives and health, and
// envd's process and filesystem services and HTTP /files where they say
// exactly what the daemon means (listing processes, file metadata, file
// content). Its methods take and return the Go types of this package: no
// caller sees the agent's protobuf messages.
//
// Every error is an internal/base/errdefs kind: the agent's Connect codes
// NotFound, InvalidArgument, AlreadyExists, FailedPrecondition,
// ResourceExhausted and Unimplemented map to the kinds of those names,
// PermissionDenied to FailedPrecondition ("permission denied: …"),
// Unavailable and transport failures to Unavailable ("agent unavailable:
// …"); cancellation keeps wrapping the context's error; anything else is an
// internal error. Where a method takes a user, it acts as that user of the
// sandbox ("" for the agent's default user, "user"), and relative paths
// are relative to that user's home.
package agentclient

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent/hutchagentconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
)

// baseURL is the agent's URL; the host part is never resolved, dial decides
// where requests go.
const baseURL = "http://agent"

// Client talks to one agent. It is safe for concurrent use.
type Client struct {
	agent      hutchagentconnect.AgentClient
	process    processconnect.ProcessClient
	filesystem filesystemconnect.FilesystemClient

	http      *http.Client
	transport *http.Transport
	dial      func(ctx context.Context) (net.Conn, error)
	ports     *http.Transport // see Ports
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
	c := &Client{
		agent:      hutchagentconnect.NewAgentClient(hc, baseURL, opts...),
		process:    processconnect.NewProcessClient(hc, baseURL, opts...),
		filesystem: filesystemconnect.NewFilesystemClient(hc, baseURL, opts...),
		http:       hc,
		transport:  tr,
		dial:       dial,
	}
	c.ports = c.portsTransport()
	return c
}

// CloseIdleConnections closes the connections no request is using, the
// agent's and the ports' (see Ports).
func (c *Client) CloseIdleConnections() {
	c.transport.CloseIdleConnections()
	c.ports.CloseIdleConnections()
}

// Health reports whether the agent answers: nil when it does, an
// Unavailable error when it cannot be reached, the context's error when ctx
// ends first (a frozen agent never answers).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.agent.Health(ctx, connect.NewRequest(&hutchagent.HealthRequest{}))
	return err
}

// withUser makes an envd request act as user (envd's Basic authorization
// header with an empty password). An empty user leaves the agent's default
// user.
func withUser[T any](req *connect.Request[T], user string) *connect.Request[T] {
	if user != "" {
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
	return req
}
