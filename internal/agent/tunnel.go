package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
)

// tunnelDialTimeout bounds the dial of a port in the sandbox. The port is
// on the loopback, which answers at once: only a listener whose backlog is
// full makes it wait.
const tunnelDialTimeout = 3 * time.Second

// tunnel serves GET agentv1.TunnelPath?port=N: it upgrades the connection
// to a TCP stream to port N on the sandbox's loopback (see agentv1.TunnelPath for
// the protocol). The stream lives on after the request: the server keeps no
// track of hijacked connections, and each ends when its two directions
// have, or with the agent.
func (s *server) tunnel(w http.ResponseWriter, r *http.Request) {
	if !hasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), agentv1.TunnelProtocol) {
		writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("a tunnel is an upgrade: send Connection: Upgrade and Upgrade: %s", agentv1.TunnelProtocol)))
		return
	}
	port, err := tunnelPort(r.URL.Query().Get("port"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	upstream, err := dialLoopback(r.Context(), port)
	if err != nil {
		writeHTTPError(w, dialError(port, err))
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		writeHTTPError(w, fmt.Errorf("take over the connection: %w", err))
		return
	}
	// The server's deadlines were for reading the request's header.
	_ = conn.SetDeadline(time.Time{})
	streamBuffers(conn)
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+agentv1.TunnelProtocol+"\r\n\r\n"); err != nil {
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	// What the daemon sent after the request, already read into the
	// server's buffer, goes first.
	if n := buf.Reader.Buffered(); n > 0 {
		early, _ := buf.Reader.Peek(n)
		if _, err := upstream.Write(early); err != nil {
			_ = conn.Close()
			_ = upstream.Close()
			return
		}
	}
	go pipe(conn, upstream)
}

// dialLoopback connects to port on the sandbox's loopback: 127.0.0.1, or
// ::1 when nothing listens there. A server told to listen on "localhost"
// may take either (Node's, Vite's, take the resolver's first answer).
func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: tunnelDialTimeout}
	p := strconv.Itoa(port)
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", p))
	if errors.Is(err, syscall.ECONNREFUSED) {
		if conn6, err6 := d.DialContext(ctx, "tcp", net.JoinHostPort("::1", p)); err6 == nil {
			return conn6, nil
		}
	}
	return conn, err
}

// streamSendBuffer is the send buffer a tunnel's socket asks for. The
// default (208 KiB) has the agent and the daemon wake each other for
// every few dozen KiB of a large download: with 4 MiB a 256 MiB download
// through a preview went from 0.65 to 0.8 GB/s here. The kernel caps it at
// net.core.wmem_max.
const streamSendBuffer = 4 << 20

// streamBuffers gives a tunnel's socket to the daemon its send buffer.
func streamBuffers(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(streamSendBuffer) // an optimisation only
	}
}

// tunnelPort reads a tunnel's port.
func tunnelPort(v string) (int, error) {
	port, err := strconv.Atoi(v)
	if err != nil || port < 1 || port > 65535 {
		return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("port must be a number from 1 to 65535, got %q", v))
	}
	return port, nil
}

// dialError says why port could not be dialed: most often, nothing listens
// on it (yet).
func dialError(port int, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("nothing listens on port %d in the sandbox (on 127.0.0.1 or ::1)", port))
	case errors.As(err, &ne) && ne.Timeout():
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("port %d in the sandbox did not accept the connection within %s", port, tunnelDialTimeout))
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("connect to port %d in the sandbox: %w", port, err))
}

// hasToken says whether header name lists token (case-insensitively), as
// Connection lists "upgrade".
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// halfCloser is a connection whose writing side ends alone (TCP and unix
// stream sockets).
type halfCloser interface {
	CloseWrite() error
}

// pipe copies a to b and b to a until both directions have ended, passing
// each end of writing on, then closes both. A direction that fails (a
// reset) ends the other too.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	var once sync.Once
	closeBoth := func() {
		_ = a.Close()
		_ = b.Close()
	}
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		// io.Copy splices between TCP and unix sockets: no user-space copy.
		if _, err := io.Copy(dst, src); err != nil {
			once.Do(closeBoth)
			return
		}
		if hc, ok := dst.(halfCloser); ok && hc.CloseWrite() == nil {
			return
		}
		once.Do(closeBoth)
	}
	wg.Add(2)
	go copyHalf(a, b)
	copyHalf(b, a)
	wg.Wait()
	once.Do(closeBoth)
}
