package jupyter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
)

// MaxMessageSize bounds one message a kernel sends, all its frames together.
// zmq4 allocates each frame at the size its header claims before reading
// it, so without a bound a kernel could make the agent allocate without
// limit. 32 MiB holds a large plot or table; a larger message (a huge print,
// say) is dropped and the connection goes on (see frameLimiter).
//
// Since each channel delivers one message at a time and waits until it is
// taken, the client holds at most about three such messages (shell, control,
// iopub) and their decoded forms.
const MaxMessageSize = 32 << 20

const (
	// zmtpGreetingSize is the size of a ZMTP 3 greeting, which precedes
	// the frames.
	zmtpGreetingSize = 64
	// maxCommandSize bounds a ZMTP command (the handshake's READY, PING):
	// kernels send only small ones, so a larger one ends the connection.
	maxCommandSize = 64 << 10
	// frameOverhead is what a frame costs zmq4 beyond its bytes (a slice
	// header and an allocation), counted so that a message of millions of
	// empty frames is bounded too.
	frameOverhead = 64

	flagMore    = 0x1
	flagLong    = 0x2
	flagCommand = 0x4
)

var errCommandTooLarge = errors.New("ZMTP command too large")

// frameLimiter sits between a kernel's TCP connection and zmq4's reader and
// enforces MaxMessageSize by reading the ZMTP framing itself. A frame that
// fits passes through unchanged. Once a message exceeds the bound, the
// limiter discards the rest of it from the wire without keeping it, and
// ends the message zmq4 sees with an empty frame, so the stream stays in
// step. A message so cut fails its signature check and is dropped, unless
// only its buffers (the unsigned frames after the content) were cut, which
// this client ignores anyway.
//
// Only one goroutine reads a connection (zmq4's handshake, then the
// client's reader), so the read state needs no lock. Writes pass through.
type frameLimiter struct {
	net.Conn
	max uint64

	greeting int    // greeting bytes still to pass through
	out      []byte // a frame header still to hand to zmq4
	hdr      [9]byte
	body     uint64 // bytes of the current frame's body still to pass through
	size     uint64 // bytes counted so far in the current message
	dropping bool   // the current message is over the bound
	err      error  // once set, every Read returns it
}

func newFrameLimiter(c net.Conn, max uint64) *frameLimiter {
	return &frameLimiter{Conn: c, max: max, greeting: zmtpGreetingSize}
}

func (l *frameLimiter) Read(p []byte) (int, error) {
	for len(p) > 0 {
		switch {
		case l.err != nil:
			return 0, l.err
		case l.greeting > 0:
			n, err := l.Conn.Read(p[:min(len(p), l.greeting)])
			l.greeting -= n
			return n, err
		case len(l.out) > 0:
			n := copy(p, l.out)
			l.out = l.out[n:]
			return n, nil
		case l.body > 0:
			n, err := l.Conn.Read(p[:min(uint64(len(p)), l.body)])
			l.body -= uint64(n) // #nosec G115 -- n is never negative
			return n, err
		default:
			l.err = l.nextFrame()
		}
	}
	return 0, nil
}

// nextFrame reads the next frame header and decides what zmq4 sees of the
// frame: all of it, or (in a message over the bound) nothing, except an
// empty frame in place of the message's last one.
func (l *frameLimiter) nextFrame() error {
	if _, err := io.ReadFull(l.Conn, l.hdr[:2]); err != nil {
		return err
	}
	flags, size, n := l.hdr[0], uint64(l.hdr[1]), 2
	if flags&flagLong != 0 {
		if _, err := io.ReadFull(l.Conn, l.hdr[2:9]); err != nil {
			return err
		}
		size, n = binary.BigEndian.Uint64(l.hdr[1:9]), 9
	}
	last := flags&flagMore == 0

	if flags&flagCommand != 0 {
		if size > maxCommandSize {
			return fmt.Errorf("%w: %d bytes", errCommandTooLarge, size)
		}
		l.out, l.body = l.hdr[:n], size
		return nil
	}

	if !l.dropping && size <= l.max && l.size+size+frameOverhead <= l.max {
		l.size += size + frameOverhead
		l.out, l.body = l.hdr[:n], size
	} else {
		l.dropping = true
		if err := discard(l.Conn, size); err != nil {
			return err
		}
		if last {
			l.hdr[0], l.hdr[1] = 0, 0
			l.out = l.hdr[:2]
		}
	}
	if last {
		l.size, l.dropping = 0, false
	}
	return nil
}

// discard reads and forgets n bytes, through a small buffer.
func discard(r io.Reader, n uint64) error {
	if n > math.MaxInt64 {
		return fmt.Errorf("ZMTP frame of %d bytes", n)
	}
	_, err := io.CopyN(io.Discard, r, int64(n))
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF // the stream ended inside a frame
	}
	return err
}
