package agentclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// DialPort opens a TCP stream to port on the sandbox's loopback, through
// the agent on a connection of its own (see agentv1.TunnelPath), whatever
// the sandbox's network. Nothing listening there is FailedPrecondition
// ("nothing listens on port N in the sandbox …"); an agent that cannot be
// reached is Unavailable. ctx bounds the opening, not the stream, which
// lives until it is closed.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.InvalidArgument("port must be from 1 to 65535, got %d", port)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	br, err := upgradeToTunnel(ctx, conn, port)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	// Uploads, as downloads on the agent's side (see the agent's
	// streamSendBuffer), move in fewer, larger writes.
	if uc, ok := conn.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(4 << 20) // an optimisation only
	}
	if br.Buffered() == 0 {
		return conn, nil
	}
	// The stream's first bytes came with the agent's answer.
	return &bufferedConn{Conn: conn, r: br}, nil
}

// upgradeToTunnel asks the agent on conn for a tunnel to port and reads its
// answer. It returns the reader the answer was read with: what it holds
// past the answer is the stream's.
func upgradeToTunnel(ctx context.Context, conn net.Conn, port int) (*bufio.Reader, error) {
	// ctx ending unblocks the handshake (its end, not a deadline of the
	// connection's: the error is then surely ctx's).
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+agentv1.TunnelPath+"?port="+strconv.Itoa(port), nil)
	if err != nil {
		return nil, fmt.Errorf("tunnel to port %d: %w", port, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", agentv1.TunnelProtocol)
	if err := req.Write(conn); err != nil {
		return nil, transportError(ctx, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, httpError(resp)
	}
	if !stop() {
		return nil, transportError(ctx, ctx.Err()) // the deadline it set stands
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, transportError(ctx, err)
	}
	return br, nil
}

// bufferedConn is a connection whose first bytes were read ahead.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite ends the writing side alone, as the connection under it does.
func (c *bufferedConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Ports is an HTTP transport to ports on the sandbox's loopback: a request
// for http://127.0.0.1:N/… reaches port N inside the sandbox through
// DialPort. It keeps the connections a response ended on for the next
// request to the same port, until they have been unused for
// portsIdleTimeout or CloseIdleConnections closes them (the daemon does
// when the sandbox halts). It asks for no compression: bodies pass as the
// server sends them.
func (c *Client) Ports() http.RoundTripper { return c.ports }

// portsIdleTimeout is how long Ports keeps a connection no request uses.
const portsIdleTimeout = 30 * time.Second

func (c *Client) portsTransport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, p, err := net.SplitHostPort(addr)
			port, perr := strconv.Atoi(p)
			if err != nil || perr != nil || host != "127.0.0.1" {
				return nil, errdefs.InvalidArgument("%s is not a port on the sandbox's loopback (127.0.0.1:PORT)", addr)
			}
			return c.DialPort(ctx, port)
		},
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     portsIdleTimeout,
		DisableCompression:  true,
		// Large bodies (downloads, uploads) move in fewer reads and writes.
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
	}
}
