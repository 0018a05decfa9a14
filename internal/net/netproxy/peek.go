// Package netproxy is the daemon's side of a sandbox's network: every TCP
// connection a sandbox opens ends at a listener of the daemon, which learns
// where it was going, asks the sandbox's netpolicy.Checker, and connects in
// its stead; every DNS question goes to the daemon's resolver.
package netproxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Protocol is what the first bytes of a connection showed.
type Protocol string

const (
	// TLS: a ClientHello, whose SNI names the host (or none).
	TLS Protocol = "tls"
	// HTTP: an HTTP/1 request, whose Host header names the host.
	HTTP Protocol = "http"
	// TCP: anything else, or nothing yet (a protocol where the server
	// speaks first, as SSH).
	TCP Protocol = "tcp"
)

// Sniff is what Peek learned from the start of a connection.
type Sniff struct {
	Protocol Protocol
	// Name is the host the connection is for, lower case, without a
	// port; "" when the connection does not say.
	Name string
	// Head is what Peek read: the caller sends it upstream before the
	// rest of the connection.
	Head []byte
}

// silent reports whether the client sent nothing within the quiet wait.
func (s Sniff) silent() bool { return s.Protocol == TCP && len(s.Head) == 0 }

// maxHead bounds what Peek reads: a ClientHello (with post-quantum key
// shares, some 2 KiB; at most 16 KiB in one record) or an HTTP request's
// head.
const maxHead = 16 << 10

// Peek reads the start of conn to learn the host it is for. A client that
// sends nothing within quiet is taken to wait for the server to speak
// first: Peek returns TCP with no name and no bytes. The connection's read
// deadline is cleared before Peek returns.
func Peek(conn net.Conn, quiet time.Duration) (Sniff, error) {
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	if err := conn.SetReadDeadline(time.Now().Add(quiet)); err != nil {
		return Sniff{}, err
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(conn, first); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return Sniff{Protocol: TCP}, nil
		}
		return Sniff{}, err
	}
	// The rest of the head may come in pieces; a client that began
	// gets a little longer to finish it.
	if err := conn.SetReadDeadline(time.Now().Add(5 * quiet)); err != nil {
		return Sniff{}, err
	}
	rec := &recorder{r: io.MultiReader(bytes.NewReader(first), conn)}
	b := first[0]
	switch {
	case b == 0x16: // a TLS handshake record
		name, err := clientHelloName(rec)
		if err != nil {
			return Sniff{Protocol: TCP, Head: rec.buf.Bytes()}, nil
		}
		return Sniff{Protocol: TLS, Name: name, Head: rec.buf.Bytes()}, nil
	case b >= 'A' && b <= 'Z': // an HTTP method
		name, ok := requestHost(rec)
		if !ok {
			return Sniff{Protocol: TCP, Head: rec.buf.Bytes()}, nil
		}
		return Sniff{Protocol: HTTP, Name: name, Head: rec.buf.Bytes()}, nil
	}
	return Sniff{Protocol: TCP, Head: first}, nil
}

// recorder keeps what is read through it, up to maxHead.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (rc *recorder) Read(p []byte) (int, error) {
	if room := maxHead - rc.buf.Len(); room <= 0 {
		return 0, errors.New("connection head too long")
	} else if len(p) > room {
		p = p[:room]
	}
	n, err := rc.r.Read(p)
	rc.buf.Write(p[:n])
	return n, err
}

// clientHelloName reads a TLS ClientHello from r and returns the name in its
// SNI ("" if it has none). crypto/tls parses it: a handshake on a
// connection that can only be read, stopped once the hello is seen.
func clientHelloName(r io.Reader) (string, error) {
	var name string
	seen := errors.New("client hello seen")
	// #nosec G402 -- no TLS is served here: the handshake only reads the
	// client's hello and stops; the version is the client's business
	err := tls.Server(readOnlyConn{r}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name = h.ServerName
			return nil, seen
		},
	}).Handshake()
	if !errors.Is(err, seen) {
		return "", err
	}
	return strings.ToLower(name), nil
}

// requestHost reads an HTTP/1 request's head from r and returns its host
// without a port.
func requestHost(r io.Reader) (string, bool) {
	req, err := http.ReadRequest(bufio.NewReaderSize(r, 4096))
	if err != nil || req.Host == "" {
		return "", false
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]")), true
}

// readOnlyConn is a net.Conn that reads from r and writes nothing: what
// crypto/tls needs to parse a ClientHello without answering it.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
