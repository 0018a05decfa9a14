// Package rfb is the client side of the remote framebuffer protocol (RFB
// 3.8, RFC 6143) that VNC servers speak, as much as a test or a benchmark
// needs to watch or drive a desktop: the handshake without a password,
// pointer and key events, and framebuffer updates in raw encoding.
package rfb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Conn is a connection to a VNC server after the handshake.
type Conn struct {
	c net.Conn
	r *bufio.Reader
	// Width and Height are the framebuffer's; Name the desktop's.
	Width, Height int
	Name          string
	bpp           int // bytes per pixel
}

// Handshake speaks RFB 3.8 over c (security type None, a shared session)
// and asks for raw pixels only.
func Handshake(c net.Conn) (*Conn, error) {
	r := bufio.NewReaderSize(c, 64<<10)
	version := make([]byte, 12)
	if _, err := io.ReadFull(r, version); err != nil {
		return nil, fmt.Errorf("rfb: the server's version: %w", err)
	}
	if string(version[:4]) != "RFB " {
		return nil, fmt.Errorf("rfb: %q is no RFB greeting", version)
	}
	if _, err := c.Write([]byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	n, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("rfb: the server refused: %s", reason(r))
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(r, types); err != nil {
		return nil, err
	}
	const none = 1
	if !contains(types, none) {
		return nil, fmt.Errorf("rfb: the server wants a password (security types %v)", types)
	}
	if _, err := c.Write([]byte{none}); err != nil {
		return nil, err
	}
	var result uint32
	if err := binary.Read(r, binary.BigEndian, &result); err != nil {
		return nil, err
	}
	if result != 0 {
		return nil, fmt.Errorf("rfb: the handshake failed: %s", reason(r))
	}
	if _, err := c.Write([]byte{1}); err != nil { // ClientInit: shared
		return nil, err
	}
	var init struct {
		W, H    uint16
		Format  [16]byte
		NameLen uint32
	}
	if err := binary.Read(r, binary.BigEndian, &init); err != nil {
		return nil, err
	}
	if init.NameLen > 1<<16 {
		return nil, errors.New("rfb: the desktop's name is too long")
	}
	name := make([]byte, init.NameLen)
	if _, err := io.ReadFull(r, name); err != nil {
		return nil, err
	}
	conn := &Conn{c: c, r: r, Width: int(init.W), Height: int(init.H), Name: string(name), bpp: int(init.Format[0]) / 8}
	// SetEncodings: raw only.
	if err := conn.send([]byte{2, 0, 0, 1}, uint32(0)); err != nil {
		return nil, err
	}
	return conn, nil
}

func contains(b []byte, v byte) bool {
	for _, x := range b {
		if x == v {
			return true
		}
	}
	return false
}

func reason(r io.Reader) string {
	var n uint32
	if binary.Read(r, binary.BigEndian, &n) != nil || n > 4096 {
		return "(no reason given)"
	}
	b := make([]byte, n)
	_, _ = io.ReadFull(r, b)
	return string(b)
}

func (c *Conn) send(parts ...any) error {
	for _, p := range parts {
		if err := binary.Write(c.c, binary.BigEndian, p); err != nil {
			return err
		}
	}
	return nil
}

// Pointer moves the pointer to x, y with buttons held (a mask: 1 left, 2
// middle, 4 right).
func (c *Conn) Pointer(x, y int, buttons byte) error {
	return c.send([]byte{5, buttons}, uint16(x), uint16(y)) // #nosec G115 -- screen coordinates
}

// Key presses (down) or releases an X keysym.
func (c *Conn) Key(keysym uint32, down bool) error {
	d := byte(0)
	if down {
		d = 1
	}
	return c.send([]byte{4, d, 0, 0}, keysym)
}

// RequestUpdate asks for the framebuffer: what changed since the last
// update when incremental, else all of it.
func (c *Conn) RequestUpdate(incremental bool) error {
	inc := byte(0)
	if incremental {
		inc = 1
	}
	return c.send([]byte{3, inc}, uint16(0), uint16(0), uint16(c.Width), uint16(c.Height)) // #nosec G115
}

// Update is a framebuffer update: its rectangles, and the bytes of
// pixels they carried.
type Update struct {
	Rects  int
	Pixels int64
}

// ReadUpdate reads server messages until a framebuffer update, which it
// returns; bells, colour maps and cut text on the way are skipped.
func (c *Conn) ReadUpdate() (Update, error) {
	for {
		t, err := c.r.ReadByte()
		if err != nil {
			return Update{}, err
		}
		switch t {
		case 0: // FramebufferUpdate
			var h struct {
				Pad   byte
				Rects uint16
			}
			if err := binary.Read(c.r, binary.BigEndian, &h); err != nil {
				return Update{}, err
			}
			u := Update{Rects: int(h.Rects)}
			for range h.Rects {
				var rect struct {
					X, Y, W, H uint16
					Encoding   int32
				}
				if err := binary.Read(c.r, binary.BigEndian, &rect); err != nil {
					return u, err
				}
				if rect.Encoding != 0 {
					return u, fmt.Errorf("rfb: a rectangle in encoding %d, not raw", rect.Encoding)
				}
				n := int64(rect.W) * int64(rect.H) * int64(c.bpp)
				if _, err := io.CopyN(io.Discard, c.r, n); err != nil {
					return u, err
				}
				u.Pixels += n
			}
			return u, nil
		case 1: // SetColourMapEntries
			var h struct {
				Pad          byte
				First, Count uint16
			}
			if err := binary.Read(c.r, binary.BigEndian, &h); err != nil {
				return Update{}, err
			}
			if _, err := io.CopyN(io.Discard, c.r, int64(h.Count)*6); err != nil {
				return Update{}, err
			}
		case 2: // Bell
		case 3: // ServerCutText
			var h struct {
				Pad [3]byte
				Len uint32
			}
			if err := binary.Read(c.r, binary.BigEndian, &h); err != nil {
				return Update{}, err
			}
			if _, err := io.CopyN(io.Discard, c.r, int64(h.Len)); err != nil {
				return Update{}, err
			}
		default:
			return Update{}, fmt.Errorf("rfb: server message type %d", t)
		}
	}
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }
