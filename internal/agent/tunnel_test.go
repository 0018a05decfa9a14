package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// listenLoopback serves handle on a new port of 127.0.0.1 (the test's
// loopback is the agent's: it runs in-process) and returns the port.
func listenLoopback(t *testing.T, handle func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// A tunnel carries bytes both ways, the server's first bytes too (sent
// before the daemon wrote anything, they may come with the agent's
// answer), and passes each side's half-close on: the server sees the end
// of what the daemon sent, and its answer after that still arrives.
func TestTunnel(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := listenLoopback(t, func(c net.Conn) {
		defer c.Close()
		_, _ = io.WriteString(c, "hello\n")
		got, _ := io.ReadAll(c) // until the daemon's half-close
		_, _ = io.WriteString(c, "got "+string(got)+"\n")
	})
	conn, err := a.client.DialPort(t.Context(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("first line = %q, %v", line, err)
	}
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "got ping\n" {
		t.Fatalf("after the half-close: %q, %v", rest, err)
	}
}

// A port nothing listens on is failed_precondition, saying so; a port out
// of range and a request that is not an upgrade are refused.
func TestTunnelRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	_, err = a.client.DialPort(t.Context(), free)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "nothing listens on port") {
		t.Errorf("DialPort of a closed port: %v", err)
	}

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return a.dial(ctx) }}}
	t.Cleanup(hc.CloseIdleConnections)
	for _, tt := range []struct {
		name, query string
		upgrade     bool
		want        string
	}{
		{"port 0", "port=0", true, "port must be a number from 1 to 65535"},
		{"port 65536", "port=65536", true, "port must be a number from 1 to 65535"},
		{"no port", "", true, "port must be a number from 1 to 65535"},
		{"not an upgrade", "port=80", false, "a tunnel is an upgrade"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://agent/tunnel?"+tt.query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.upgrade {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "hutch-tcp")
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tt.want) {
				t.Errorf("%d %s, want 400 saying %q", resp.StatusCode, body, tt.want)
			}
		})
	}
}

// The server closing its end first ends the tunnel: the daemon reads EOF.
func TestTunnelServerCloses(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := listenLoopback(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "bye")
		_ = c.Close()
	})
	conn, err := a.client.DialPort(t.Context(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(conn); err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v", got, err)
	}
}
