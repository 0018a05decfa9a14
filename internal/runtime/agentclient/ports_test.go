package agentclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// fakeTunnel answers tunnels as the agent does, with the stream's first
// bytes in the same write as its answer; the stream then echoes.
func fakeTunnel(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("port") != "8080" || r.Header.Get("Upgrade") != "hutch-tcp" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusPreconditionFailed)
			_, _ = io.WriteString(w, `{"code":"failed_precondition","message":"nothing listens on port `+r.URL.Query().Get("port")+` in the sandbox"}`)
			return
		}
		conn := upgrade(t, w, "hello ")
		if conn == nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, conn)
	}
}

// upgrade answers a tunnel's request as the agent does, with first (the
// stream's first bytes) in the same write, and returns the connection.
func upgrade(t *testing.T, w http.ResponseWriter, first string) net.Conn {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return nil
	}
	_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: hutch-tcp\r\n\r\n"+first)
	return conn
}

func TestDialPort(t *testing.T) {
	t.Parallel()
	c := serve(t, fakeTunnel(t))
	conn, err := c.DialPort(t.Context(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "world"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("hello world"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "hello world" {
		t.Fatalf("read %q, %v: the bytes that came with the answer must come first", got, err)
	}

	if _, err := c.DialPort(t.Context(), 9090); !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != "nothing listens on port 9090 in the sandbox" {
		t.Errorf("DialPort of a port nothing listens on: %v", err)
	}
	for _, port := range []int{0, 65536} {
		if _, err := c.DialPort(t.Context(), port); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("DialPort(%d): %v, want invalid_argument", port, err)
		}
	}
}

// An agent that does not answer holds DialPort no longer than its context.
func TestDialPortCanceled(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	c := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.DialPort(ctx, 8080)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DialPort of a silent agent: %v, want the context's deadline", err)
	}
}

// Ports carries requests to the port the URL names, and refuses others.
func TestPorts(t *testing.T) {
	t.Parallel()
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := upgrade(t, w, "")
		if conn == nil {
			return
		}
		defer conn.Close()
		// The server on the port: one answer naming the port.
		buf := make([]byte, 4096)
		if _, err := conn.Read(buf); err != nil {
			return
		}
		body := "port " + r.URL.Query().Get("port")
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
	}))
	hc := &http.Client{Transport: c.Ports()}
	resp, err := hc.Get("http://127.0.0.1:3000/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "port 3000" {
		t.Errorf("body = %q", body)
	}
	if _, err := hc.Get("http://example.com:3000/"); err == nil || !strings.Contains(err.Error(), "not a port on the sandbox's loopback") {
		t.Errorf("a request for another host: %v", err)
	}
}
