package rfb

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// TestHandshakeAndUpdate speaks to a server of the test's own over a
// pipe: the handshake, a pointer event the server reads, and an update of
// one 2×3 rectangle of 32-bit pixels after a bell.
func TestHandshakeAndUpdate(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	defer client.Close()
	done := make(chan error, 1)
	go func() { done <- fakeServer(server) }()
	c, err := Handshake(client)
	if err != nil {
		t.Fatal(err)
	}
	if c.Width != 640 || c.Height != 480 || c.Name != "test" {
		t.Errorf("the server is %dx%d %q", c.Width, c.Height, c.Name)
	}
	if err := c.Pointer(300, 200, 1); err != nil {
		t.Fatal(err)
	}
	u, err := c.ReadUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if u.Rects != 1 || u.Pixels != 2*3*4 {
		t.Errorf("the update: %+v", u)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func fakeServer(c net.Conn) error {
	defer c.Close()
	w := func(parts ...any) error {
		for _, p := range parts {
			if err := binary.Write(c, binary.BigEndian, p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := w([]byte("RFB 003.008\n")); err != nil {
		return err
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if err := w([]byte{1, 1}); err != nil { // one security type: None
		return err
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		return err
	}
	if err := w(uint32(0)); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil { // ClientInit
		return err
	}
	format := [16]byte{32, 24, 0, 1}
	if err := w(uint16(640), uint16(480), format, uint32(4), []byte("test")); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf[:8]); err != nil { // SetEncodings with one
		return err
	}
	if _, err := io.ReadFull(c, buf[:6]); err != nil { // the pointer event
		return err
	}
	if buf[0] != 5 || binary.BigEndian.Uint16(buf[2:]) != 300 || binary.BigEndian.Uint16(buf[4:]) != 200 {
		return io.ErrUnexpectedEOF
	}
	return w([]byte{2}, []byte{0, 0}, uint16(1), uint16(0), uint16(0), uint16(2), uint16(3), int32(0), make([]byte, 24))
}
