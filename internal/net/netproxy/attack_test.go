package netproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/net/mitm"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// Issue 36, findings 12 and 13: what the policy allowed for a
// connection's first request is not what its later requests get, and a
// proxy secret's value follows the vault, not the connection.

// rawServer is a plain-TCP HTTP server on loopback that answers every
// request 200 and keeps each request's head as it came, byte for byte.
type rawServer struct {
	ln    net.Listener
	mu    sync.Mutex
	heads []string
}

func newRawServer(t *testing.T) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					var head strings.Builder
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						head.WriteString(line)
						if line == "\r\n" {
							break
						}
					}
					s.mu.Lock()
					s.heads = append(s.heads, head.String())
					s.mu.Unlock()
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return s
}

func (s *rawServer) seen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.heads, "")
}

// A plain-HTTP connection allowed for web.example cannot carry, by
// keep-alive or pipelining, a request for a host the policy refuses: the
// request is answered 403 and never reaches the server.
func TestAttackKeepAliveHostSwitch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pipelined bool
	}{{"one after another", false}, {"pipelined", true}} {
		t.Run(tc.name, func(t *testing.T) {
			w, web := webWorld(t)

			c := w.dial("203.0.113.10:80")
			r := bufio.NewReader(c)
			first := "GET /1 HTTP/1.1\r\nHost: web.example\r\n\r\n"
			second := "GET /2 HTTP/1.1\r\nHost: other.example\r\n\r\n"
			if tc.pipelined {
				_, _ = io.WriteString(c, first+second)
			} else {
				_, _ = io.WriteString(c, first)
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("web.example: %d, want 200", resp.StatusCode)
			}
			if !tc.pipelined {
				_, _ = io.WriteString(c, second)
			}
			resp, err = http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("other.example on the same connection: %v, want a 403", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "blocked_by_policy: other.example:80") {
				t.Errorf("other.example on web.example's connection: %d %q, want 403 blocked_by_policy", resp.StatusCode, body)
			}
			if seen := web.seen(); strings.Contains(seen, "other.example") {
				t.Errorf("the server got the request for other.example:\n%s", seen)
			}
			w.evMu.Lock()
			defer w.evMu.Unlock()
			if len(w.events) != 1 || w.events[0].Dest != "other.example:80" {
				t.Errorf("events %+v, want the refusal of other.example:80", w.events)
			}
		})
	}
}

// secretHost is a TLS host for api.test whose certificate a test CA
// signed, an Interceptor trusting it, and what the sandbox's client
// trusts: the Interceptor's CA.
type secretHost struct {
	srv   *httptest.Server
	ic    *mitm.Interceptor
	roots *x509.CertPool // the sandbox's
	mu    sync.Mutex
	auth  []string // each request's Authorization
	hosts []string // each request's Host
}

func newSecretHost(t *testing.T) *secretHost {
	t.Helper()
	hostCA, err := mitm.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hutch, err := mitm.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := hostCA.Leaf("api.test")
	if err != nil {
		t.Fatal(err)
	}
	h := &secretHost{roots: x509.NewCertPool()}
	h.roots.AppendCertsFromPEM(hutch.CertPEM())
	upRoots := x509.NewCertPool()
	upRoots.AppendCertsFromPEM(hostCA.CertPEM())
	h.ic = &mitm.Interceptor{CA: hutch, RootCAs: upRoots}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		h.hosts = append(h.hosts, r.Host)
		h.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	h.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	h.srv.StartTLS()
	t.Cleanup(h.srv.Close)
	return h
}

// do sends a request on the sandbox's connection and reads its answer.
func do(t *testing.T, c *tls.Conn, r *bufio.Reader, host, auth string) (int, string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n\r\n", host, auth); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

const (
	placeholder = "hutch-secret-API_KEY-00112233445566778899aabb"
	value       = "sk-first-value-0123456789"
	rotated     = "sk-second-value-9876543210"
)

// A secret deleted, or given a new value, reaches a running sandbox's
// open connection from its next request: the proxy asks for the swaps of
// every request, not once a connection.
func TestAttackSecretRevoked(t *testing.T) {
	w := newWorld(t, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"api.test"}})
	host := newSecretHost(t)
	apiAddr := netip.MustParseAddr("203.0.113.30")
	w.names["api.test"] = []netip.Addr{apiAddr}
	w.hosts[netip.AddrPortFrom(apiAddr, 443)] = host.srv.Listener.Addr().String()

	var mu sync.Mutex
	current := []mitm.Swap{{Placeholder: placeholder, Value: value}}
	w.proxy.Interceptor = host.ic
	w.proxy.Swaps = func(name string, port uint16) []mitm.Swap {
		mu.Lock()
		defer mu.Unlock()
		if name != "api.test" || port != 443 {
			return nil
		}
		return append([]mitm.Swap(nil), current...)
	}
	set := func(s []mitm.Swap) { mu.Lock(); current = s; mu.Unlock() }

	c := tls.Client(w.dial("203.0.113.30:443"), &tls.Config{ServerName: "api.test", RootCAs: host.roots})
	r := bufio.NewReader(c)
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"before", func() {}, "Bearer " + value},
		{"rotated", func() { set([]mitm.Swap{{Placeholder: placeholder, Value: rotated}}) }, "Bearer " + rotated},
		{"deleted", func() { set(nil) }, "Bearer " + placeholder},
	}
	for i, step := range steps {
		step.change()
		if code, body := do(t, c, r, "api.test", "Bearer "+placeholder); code != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", step.name, code, body)
		}
		host.mu.Lock()
		got := host.auth[i]
		host.mu.Unlock()
		if got != step.want {
			t.Errorf("%s: the host got Authorization %q, want %q", step.name, got, step.want)
		}
	}
}

// Domain fronting: a request whose Host names another site than the one
// the connection was allowed for never reaches the server under that
// name. Over plain HTTP an absolute-form target names one host and a
// Host header another (a server that routes by Host would serve the
// other); over TLS where the proxy ends it to inject a secret, the SNI is
// allowed and the Host another site behind the same front end.
// (Over TLS the proxy only splices, it cannot see the Host; see Proxy.)
func TestAttackDomainFronting(t *testing.T) {
	t.Run("plain HTTP absolute-form", func(t *testing.T) {
		w, web := webWorld(t)
		c := w.dial("203.0.113.10:80")
		_, _ = io.WriteString(c, "GET http://web.example/ HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if seen := web.seen(); strings.Contains(seen, "other.example") {
			t.Errorf("the server got a Host for other.example:\n%s", seen)
		}
	})
	t.Run("intercepted TLS", func(t *testing.T) {
		w := newWorld(t, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"api.test", "other.test"}})
		host := newSecretHost(t)
		apiAddr := netip.MustParseAddr("203.0.113.30")
		w.names["api.test"] = []netip.Addr{apiAddr}
		w.hosts[netip.AddrPortFrom(apiAddr, 443)] = host.srv.Listener.Addr().String()
		w.proxy.Interceptor = host.ic
		w.proxy.Swaps = func(name string, port uint16) []mitm.Swap {
			if name != "api.test" {
				return nil
			}
			return []mitm.Swap{{Placeholder: placeholder, Value: value}}
		}
		c := tls.Client(w.dial("203.0.113.30:443"), &tls.Config{ServerName: "api.test", RootCAs: host.roots})
		r := bufio.NewReader(c)
		if code, _ := do(t, c, r, "api.test", "Bearer "+placeholder); code != 200 {
			t.Fatalf("api.test: %d", code)
		}
		if code, body := do(t, c, r, "other.test", "Bearer "+placeholder); code != http.StatusMisdirectedRequest {
			t.Errorf("other.test behind api.test: %d %q, want 421", code, body)
		}
		host.mu.Lock()
		defer host.mu.Unlock()
		if len(host.hosts) != 1 || host.hosts[0] != "api.test" {
			t.Errorf("the host got requests for %q, want only api.test", host.hosts)
		}
	})
}

// An upgrade to cleartext HTTP/2 would turn a relayed connection into
// frames whose requests each name their own host, unread by the policy:
// the upgrade is taken out of the request, and the server answers in
// HTTP/1.1 as to any client it does not upgrade.
func TestAttackH2CUpgrade(t *testing.T) {
	w, web := webWorld(t)
	c := w.dial("203.0.113.10:80")
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: web.example\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if seen := web.seen(); strings.Contains(strings.ToLower(seen), "h2c") || strings.Contains(seen, "HTTP2-Settings:") || strings.Contains(seen, "Http2-Settings:") {
		t.Errorf("the server was asked for h2c:\n%s", seen)
	}
}

// webWorld is a world whose policy allows only web.example, a server of
// which answers at 203.0.113.10:80.
func webWorld(t *testing.T) (*world, *rawServer) {
	t.Helper()
	w := newWorld(t, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"web.example"}})
	web := newRawServer(t)
	webAddr := netip.MustParseAddr("203.0.113.10")
	w.names["web.example"] = []netip.Addr{webAddr}
	w.hosts[netip.AddrPortFrom(webAddr, 80)] = web.ln.Addr().String()
	return w, web
}
