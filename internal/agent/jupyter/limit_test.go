package jupyter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
)

// zmtpFrame encodes one ZMTP frame, in the long form when the body needs it.
func zmtpFrame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		out := []byte{flags | flagLong, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(out[1:], uint64(len(body)))
		return append(out, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// concat joins byte slices, to write a stream as the sum of its frames.
func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestFrameLimiter(t *testing.T) {
	const max = 200
	greeting := bytes.Repeat([]byte{0xaa}, zmtpGreetingSize)
	big := bytes.Repeat([]byte{'x'}, 300)
	empty := zmtpFrame(0, nil)
	for _, tc := range []struct {
		name    string
		in, out []byte
		err     error
	}{
		{
			name: "fits",
			in:   concat(greeting, zmtpFrame(flagMore, []byte("a")), zmtpFrame(0, []byte("b"))),
			out:  concat(greeting, zmtpFrame(flagMore, []byte("a")), zmtpFrame(0, []byte("b"))),
		},
		{
			name: "one frame too large",
			in:   concat(greeting, zmtpFrame(0, big), zmtpFrame(0, []byte("next"))),
			out:  concat(greeting, empty, zmtpFrame(0, []byte("next"))),
		},
		{
			name: "message too large in its second frame",
			in:   concat(greeting, zmtpFrame(flagMore, []byte("head")), zmtpFrame(flagMore, big), zmtpFrame(0, []byte("tail")), zmtpFrame(0, []byte("next"))),
			out:  concat(greeting, zmtpFrame(flagMore, []byte("head")), empty, zmtpFrame(0, []byte("next"))),
		},
		{
			// Each frame counts frameOverhead: three empty frames fit
			// in 200 bytes, a fourth does not.
			name: "too many empty frames",
			in:   concat(greeting, zmtpFrame(flagMore, nil), zmtpFrame(flagMore, nil), zmtpFrame(flagMore, nil), zmtpFrame(flagMore, nil), zmtpFrame(0, nil)),
			out:  concat(greeting, zmtpFrame(flagMore, nil), zmtpFrame(flagMore, nil), zmtpFrame(flagMore, nil), empty),
		},
		{
			name: "commands pass",
			in:   concat(greeting, zmtpFrame(flagCommand, []byte("\x05READY")), zmtpFrame(0, []byte("a"))),
			out:  concat(greeting, zmtpFrame(flagCommand, []byte("\x05READY")), zmtpFrame(0, []byte("a"))),
		},
		{
			name: "command too large",
			in:   concat(greeting, zmtpFrame(flagCommand, make([]byte, maxCommandSize+1))),
			out:  greeting,
			err:  errCommandTooLarge,
		},
		{
			// A header claiming an exabyte allocates nothing: the
			// limiter discards what arrives, then meets the end.
			name: "huge claim",
			in:   concat(greeting, []byte{flagLong, 0x10, 0, 0, 0, 0, 0, 0, 0}, []byte("only this")),
			out:  greeting,
			err:  io.ErrUnexpectedEOF,
		},
	} {
		for _, oneByte := range []bool{false, true} {
			name := tc.name
			if oneByte {
				name += " one byte at a time"
			}
			t.Run(name, func(t *testing.T) {
				kernel, agent := net.Pipe()
				go func() {
					_, _ = kernel.Write(tc.in)
					kernel.Close()
				}()
				defer agent.Close()
				var r io.Reader = newFrameLimiter(agent, max)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				got, err := io.ReadAll(r)
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v, want %v", err, tc.err)
				}
				if !bytes.Equal(got, tc.out) {
					t.Errorf("read\n%q\nwant\n%q", got, tc.out)
				}
			})
		}
	}
}
