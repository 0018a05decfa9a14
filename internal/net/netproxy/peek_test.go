package netproxy

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// peekFrom runs client on one end of a loopback TCP connection and Peek on
// the other; it returns what Peek saw and what the client sent in all.
func peekFrom(t *testing.T, client func(net.Conn)) (Sniff, []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		client(c)
		// Wait for the server's close.
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := Peek(conn, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("Peek: %v", err)
	}
	// The rest: whatever the client sent after the head.
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	rest, _ := io.ReadAll(conn)
	return s, append(append([]byte{}, s.Head...), rest...)
}

func TestPeek(t *testing.T) {
	hello := func(name string) func(net.Conn) {
		return func(c net.Conn) {
			tc := tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true}) // #nosec G402 -- nothing answers: only the hello is sent
			_ = tc.SetDeadline(time.Now().Add(time.Second))
			_ = tc.Handshake()
		}
	}
	send := func(s string) func(net.Conn) {
		return func(c net.Conn) { _, _ = c.Write([]byte(s)) }
	}
	for _, tc := range []struct {
		name     string
		client   func(net.Conn)
		protocol Protocol
		host     string
		sent     string // what must have been read and kept, when known
	}{
		{"TLS with SNI", hello("Registry.NPMjs.org"), TLS, "registry.npmjs.org", ""},
		{"TLS without SNI", hello("203.0.113.7"), TLS, "", ""},
		{"HTTP", send("GET /simple/ HTTP/1.1\r\nHost: PyPI.org:8080\r\nUser-Agent: pip\r\n\r\n"), HTTP, "pypi.org", "GET /simple/ HTTP/1.1\r\nHost: PyPI.org:8080\r\nUser-Agent: pip\r\n\r\n"},
		{"HTTP with a body", send("POST /v1 HTTP/1.1\r\nHost: api.example\r\nContent-Length: 5\r\n\r\nhello"), HTTP, "api.example", "POST /v1 HTTP/1.1\r\nHost: api.example\r\nContent-Length: 5\r\n\r\nhello"},
		{"HTTP in pieces", func(c net.Conn) {
			_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHo"))
			time.Sleep(50 * time.Millisecond)
			_, _ = c.Write([]byte("st: slow.example\r\n\r\n"))
		}, HTTP, "slow.example", "GET / HTTP/1.1\r\nHost: slow.example\r\n\r\n"},
		{"IPv6 host", send("GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n"), HTTP, "2001:db8::1", ""},
		{"an SSH client", send("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"), TCP, "", "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"},
		{"binary", send("\x00\x01\x02\x03"), TCP, "", "\x00\x01\x02\x03"},
		{"a server-first protocol", func(net.Conn) {}, TCP, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, all := peekFrom(t, tc.client)
			if s.Protocol != tc.protocol || s.Name != tc.host {
				t.Errorf("Peek = %s %q, want %s %q", s.Protocol, s.Name, tc.protocol, tc.host)
			}
			if tc.sent != "" && string(all) != tc.sent {
				t.Errorf("head and rest = %q, want all that was sent, %q", all, tc.sent)
			}
			if tc.protocol == TLS && (len(s.Head) < 5 || s.Head[0] != 0x16) {
				t.Errorf("TLS head %x, want the ClientHello record", s.Head)
			}
		})
	}
}

// A head longer than Peek keeps is not parsed further: TCP, with what was
// read.
func TestPeekBoundsTheHead(t *testing.T) {
	long := "GET / HTTP/1.1\r\nX-Filler: " + strings.Repeat("a", 2*maxHead) + "\r\nHost: late.example\r\n\r\n"
	s, all := peekFrom(t, func(c net.Conn) { _, _ = c.Write([]byte(long)) })
	if s.Protocol != TCP || s.Name != "" || len(s.Head) > maxHead {
		t.Errorf("Peek = %s %q with %d bytes, want TCP and at most %d", s.Protocol, s.Name, len(s.Head), maxHead)
	}
	if !bytes.Equal(all, []byte(long)) {
		t.Errorf("the head and the rest are not what was sent (%d bytes of %d)", len(all), len(long))
	}
}
