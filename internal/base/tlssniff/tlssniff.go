// Package tlssniff serves TLS and plain connections on one listener: a
// connection whose first byte opens a TLS handshake record is served over
// TLS, any other as it is. Which one is decided at the connection's first
// read (or write), in the goroutine that serves it, never in Accept: a
// client that sends nothing holds up no one else.
package tlssniff

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
)

// handshake is the content type of a TLS handshake record, the first byte
// a TLS client sends.
const handshake = 0x16

// Listener returns a listener whose connections speak TLS with cfg when
// their client does, and plain otherwise.
func Listener(ln net.Listener, cfg *tls.Config) net.Listener {
	return &listener{Listener: ln, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg *tls.Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, cfg: l.cfg}, nil
}

// conn is a connection not yet known to be TLS or plain until first used.
type conn struct {
	net.Conn
	cfg  *tls.Config
	once sync.Once
	use  net.Conn // the TLS connection, or a plain one that reads what was peeked first
}

// buffered is a plain connection whose first bytes were peeked.
type buffered struct {
	net.Conn
	r *bufio.Reader
}

func (b *buffered) Read(p []byte) (int, error) { return b.r.Read(p) }

func (c *conn) decide() net.Conn {
	c.once.Do(func() {
		r := bufio.NewReaderSize(c.Conn, 512)
		plain := &buffered{Conn: c.Conn, r: r}
		first, err := r.Peek(1)
		if err == nil && first[0] == handshake {
			c.use = tls.Server(plain, c.cfg)
			return
		}
		c.use = plain
	})
	return c.use
}

func (c *conn) Read(p []byte) (int, error)  { return c.decide().Read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.decide().Write(p) }

// Close closes the connection. It does not wait for a decision under way
// (a read blocked on the first byte ends with it), so a TLS connection
// ends without its close notification, as HTTP/1.1 allows.
func (c *conn) Close() error { return c.Conn.Close() }
