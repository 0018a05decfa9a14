package jupyter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// dialRetry is how long Dial waits before trying a port again that refused
// the connection: a kernel just started binds its ports within a second or
// two, and checking every 50 ms adds little to that.
const dialRetry = 50 * time.Millisecond

// socket is one ZMTP connection to one of a kernel's ports. The codec is
// zmq4's; the net.Conn under it, and the goroutine that reads it, are the
// client's (see the package comment).
type socket struct {
	name string // "shell", "control" or "iopub", for errors and dispatch
	nc   net.Conn
	zc   *zmq4.Conn

	// wmu keeps one message on the wire at a time: zmq4 writes each frame
	// of a message separately.
	wmu sync.Mutex
}

// dialSocket connects to a kernel's port and performs the ZMTP handshake as
// a socket of type typ. A port that refuses the connection is tried again
// until ctx ends, since the kernel may not have bound it yet.
func dialSocket(ctx context.Context, name string, typ zmq4.SocketType, addr string) (*socket, error) {
	nc, err := dialTCP(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("dial kernel %s port: %w", name, err)
	}
	zc, err := handshake(ctx, nc, typ)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("dial kernel %s port: %w", name, err)
	}
	return &socket{name: name, nc: nc, zc: zc}, nil
}

func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	for {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return nc, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
			return nil, err
		}
		t := time.NewTimer(dialRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// handshake runs the ZMTP greeting and NULL handshake on nc, bounded by
// ctx: a port that accepts but never greets (not a kernel's) cannot hold
// Dial past it.
func handshake(ctx context.Context, nc net.Conn, typ zmq4.SocketType) (*zmq4.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok {
		if err := nc.SetDeadline(deadline); err != nil {
			return nil, err
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	zc, err := zmq4.Open(newFrameLimiter(nc, MaxMessageSize), null.Security(), typ, zmq4.SocketIdentity(newID()), false, nil)
	if !stop() {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return zc, nil
}

// send writes one message, bounded by ctx through a write deadline. A
// write cut short leaves part of a message on the stream, which can never
// be put right, so the caller must give the connection up on any error.
func (s *socket) send(ctx context.Context, frames [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = s.nc.SetWriteDeadline(time.Unix(1, 0))
	})
	err := s.zc.SendMsg(zmq4.NewMsgFrom(frames...))
	if stop() {
		return err
	}
	// ctx ended while writing: wait until the deadline is in place, so
	// that resetting it below is not undone.
	<-fired
	if err != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return s.nc.SetWriteDeadline(time.Time{})
}
