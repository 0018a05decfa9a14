package mitm

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
)

// replayConn is a connection whose first reads return head: the bytes
// netproxy's peek already took off it (the ClientHello).
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// countingConn tells count of every byte read (out: from the sandbox)
// and written (in: to the sandbox).
type countingConn struct {
	net.Conn
	count func(out bool, n int64)
}

func (c *countingConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.count(true, int64(n))
	}
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.count(false, int64(n))
	}
	return n, err
}

// headLimit bounds what may be read through it while a message's head
// is read (the Go HTTP server's way: http.ReadRequest itself has no
// bound), so that a head without end cannot fill the daemon's memory;
// bodies are read without a bound. Only one goroutine reads at a time.
type headLimit struct {
	r       io.Reader
	left    int64 // when limited
	limit   bool
	reached bool
}

func (l *headLimit) Read(p []byte) (int, error) {
	if !l.limit {
		return l.r.Read(p)
	}
	if l.left <= 0 {
		l.reached = true
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// bound starts bounding what is read to n bytes.
func (l *headLimit) bound(n int64) { l.limit, l.left, l.reached = true, n, false }

// unbound ends the bound.
func (l *headLimit) unbound() { l.limit = false }

// bufferedConn is a connection whose reads come first from what its
// reader already buffered: for the splice after a protocol switch.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c bufferedConn) CloseWrite() error { return closeWrite(c.Conn) }

// errNoHalfClose is a connection whose write half cannot be shut alone.
var errNoHalfClose = errors.New("the connection cannot shut its write half alone")

// closeWrite shuts c's write half, if c can (TCP and TLS connections, and
// those made of them here, can).
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
