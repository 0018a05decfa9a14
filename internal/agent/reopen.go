package agent

import (
	"net"
	"os"
	"sync"
)

// reopenable is a listener on a unix socket path that can be closed and
// made again while the server that accepts from it goes on: a gVisor
// checkpoint cannot save a socket listening on a host path, so the daemon
// has the agent close it before one and make it again after the restore
// (agentv1.SignalUnlisten, SignalRelisten; see server.relisten).
type reopenable struct {
	path  string
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	close sync.Once

	mu sync.Mutex
	ln net.Listener // nil while closed
}

func newReopenable(path string) (*reopenable, error) {
	r := &reopenable{path: path, conns: make(chan net.Conn), done: make(chan struct{})}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// open listens on the path again (a stale socket file goes first); open
// when open does nothing.
func (r *reopenable) open() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		return nil
	}
	ln, err := listen(Config{Socket: r.path})
	if err != nil {
		return err
	}
	r.ln, r.addr = ln, ln.Addr()
	go r.accept(ln)
	return nil
}

// unlisten closes the listening socket, then removes its file: the
// daemon takes the file's absence to mean that no socket is bound any more
// (and checkpoints), so the file must outlive the socket. net's own
// unlink on close comes before the close.
func (r *reopenable) unlisten() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln == nil {
		return
	}
	if ul, ok := r.ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	_ = r.ln.Close() // returns once the descriptor is closed
	_ = os.Remove(r.path)
	r.ln = nil
}

// accept hands ln's connections to Accept until ln is closed.
func (r *reopenable) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case r.conns <- c:
		case <-r.done:
			_ = c.Close()
			return
		}
	}
}

func (r *reopenable) Accept() (net.Conn, error) {
	select {
	case c := <-r.conns:
		return c, nil
	case <-r.done:
		return nil, net.ErrClosed
	}
}

func (r *reopenable) Close() error {
	r.close.Do(func() { close(r.done) })
	r.unlisten()
	return nil
}

func (r *reopenable) Addr() net.Addr { return r.addr }
