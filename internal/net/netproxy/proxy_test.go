package netproxy

import (
	"bufio"
	"context"
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
	"time"

	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// world is a small internet for the proxy's tests: public-looking test
// addresses whose servers listen on loopback, names that resolve to them,
// and the original destination of each connection made to the proxy.
type world struct {
	t      *testing.T
	proxy  *Proxy
	ln     net.Listener
	hosts  map[netip.AddrPort]string // public address → loopback server
	names  map[string][]netip.Addr
	origMu sync.Mutex
	orig   map[string]netip.AddrPort // client's address → where it was going
	evMu   sync.Mutex
	events []Event
}

func newWorld(t *testing.T, policy netpolicy.Policy) *world {
	t.Helper()
	c, err := netpolicy.Compile(policy)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, hosts: map[netip.AddrPort]string{}, names: map[string][]netip.Addr{}, orig: map[string]netip.AddrPort{}}
	w.proxy = &Proxy{
		Policy: func() *netpolicy.Checker { return c },
		// The test notes where a connection goes once it is made: the
		// proxy may ask first.
		OriginalDst: func(conn net.Conn) (netip.AddrPort, error) {
			for range 200 {
				w.origMu.Lock()
				dest, ok := w.orig[conn.RemoteAddr().String()]
				w.origMu.Unlock()
				if ok {
					return dest, nil
				}
				time.Sleep(5 * time.Millisecond)
			}
			return netip.AddrPort{}, fmt.Errorf("no destination noted for %s", conn.RemoteAddr())
		},
		Lookup: func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if a, ok := w.names[host]; ok {
				return a, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			real, ok := w.hosts[netip.MustParseAddrPort(addr)]
			if !ok {
				return nil, fmt.Errorf("%s: no route to host", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
		Refused: func(e Event) { w.evMu.Lock(); w.events = append(w.events, e); w.evMu.Unlock() },
		// The default: under make test a Go client took over 100 ms to
		// send its first byte (a ClientHello's post-quantum key share),
		// and a shorter wait took it for a server-first protocol.
		Quiet: time.Second,
	}
	w.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.proxy.Serve(ctx, w.ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return w
}

// dial connects to the proxy as a sandbox connecting to dest would.
func (w *world) dial(dest string) net.Conn {
	w.t.Helper()
	c, err := net.Dial("tcp", w.ln.Addr().String())
	if err != nil {
		w.t.Fatal(err)
	}
	w.origMu.Lock()
	w.orig[c.LocalAddr().String()] = netip.MustParseAddrPort(dest)
	w.origMu.Unlock()
	w.t.Cleanup(func() { c.Close() })
	return c
}

// get makes an HTTP request for host to dest through the proxy.
func (w *world) get(dest, host string) (int, string) {
	w.t.Helper()
	c := w.dial(dest)
	_, _ = fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func serve(t *testing.T, tlsOn bool, body string) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = fmt.Fprint(w, body) })
	var s *httptest.Server
	if tlsOn {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

func TestProxyAllowlist(t *testing.T) {
	w := newWorld(t, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"web.example", "inward.example", "198.51.100.0/24"}})
	web, webTLS, evil := serve(t, false, "web"), serve(t, true, "web over tls"), serve(t, false, "evil")
	webAddr := netip.MustParseAddr("203.0.113.10")
	w.names["web.example"] = []netip.Addr{webAddr}
	w.names["other.example"] = []netip.Addr{netip.MustParseAddr("203.0.113.20")}
	w.names["inward.example"] = []netip.Addr{netip.MustParseAddr("10.0.0.5")}
	w.hosts[netip.AddrPortFrom(webAddr, 80)] = web.Listener.Addr().String()
	w.hosts[netip.AddrPortFrom(webAddr, 443)] = webTLS.Listener.Addr().String()
	w.hosts[netip.MustParseAddrPort("203.0.113.99:80")] = evil.Listener.Addr().String()
	w.hosts[netip.MustParseAddrPort("203.0.113.20:80")] = evil.Listener.Addr().String()

	// The allowed name, over HTTP and HTTPS.
	if code, body := w.get("203.0.113.10:80", "web.example"); code != 200 || body != "web" {
		t.Errorf("HTTP to web.example: %d %q", code, body)
	}
	roots := x509.NewCertPool()
	roots.AddCert(webTLS.Certificate())
	tc := tls.Client(w.dial("203.0.113.10:443"), &tls.Config{ServerName: "web.example", RootCAs: roots, InsecureSkipVerify: true}) // #nosec G402 -- the test server's certificate names 127.0.0.1, not web.example
	_, _ = fmt.Fprint(tc, "GET / HTTP/1.1\r\nHost: web.example\r\nConnection: close\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(tc), nil); err != nil || resp.StatusCode != 200 {
		t.Errorf("HTTPS to web.example: %v, %v", resp, err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "web over tls" {
			t.Errorf("HTTPS body %q", b)
		}
	}

	// The allowed name paired with an address of the sandbox's choosing
	// goes to the name's own address.
	if code, body := w.get("203.0.113.99:80", "web.example"); code != 200 || body != "web" {
		t.Errorf("web.example at the sandbox's address: %d %q, want web's answer", code, body)
	}

	// Refused: the server by address, another name, a name resolving
	// inward. HTTP hears why; TLS is reset.
	for _, tc := range []struct{ dest, host, rule, reason string }{
		{"203.0.113.10:80", "203.0.113.10", "mode", "203.0.113.10:80 is not in the allow-list"},
		{"203.0.113.20:80", "other.example", "mode", "other.example:80 (203.0.113.20) is not in the allow-list"},
		{"203.0.113.10:80", "inward.example", "always", "a private address"},
	} {
		code, body := w.get(tc.dest, tc.host)
		if code != 403 || !strings.HasPrefix(body, "blocked_by_policy: ") || !strings.Contains(body, tc.reason) {
			t.Errorf("HTTP for %s at %s: %d %q, want 403 saying %q", tc.host, tc.dest, code, body, tc.reason)
		}
	}
	other := tls.Client(w.dial("203.0.113.20:443"), &tls.Config{ServerName: "other.example", InsecureSkipVerify: true}) // #nosec G402 -- refused before any certificate
	if err := other.Handshake(); err == nil {
		t.Error("TLS to other.example: handshake made, want a reset")
	}

	w.evMu.Lock()
	if len(w.events) != 4 || w.events[3].Dest != "other.example:443" || w.events[3].Kind != "tcp" || w.events[1].Rule != "mode" || w.events[2].Rule != "always" {
		t.Errorf("events: %+v", w.events)
	}
	w.evMu.Unlock()
	if w.proxy.Connections.Load() != 3 || w.proxy.BytesOut.Load() == 0 || w.proxy.BytesIn.Load() == 0 {
		t.Errorf("counters: %d connections, %d out, %d in", w.proxy.Connections.Load(), w.proxy.BytesOut.Load(), w.proxy.BytesIn.Load())
	}
}

// Plain TCP goes by address: to an address rule, both a client-first
// protocol and one where the server speaks first.
func TestProxyPlainTCP(t *testing.T) {
	w := newWorld(t, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"198.51.100.0/24"}})
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = fmt.Fprint(c, "220 banner\r\n") // server first
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	w.hosts[netip.MustParseAddrPort("198.51.100.5:25")] = echo.Addr().String()
	w.hosts[netip.MustParseAddrPort("203.0.113.5:25")] = echo.Addr().String()

	// Port 25 is a server-first protocol's: the banner comes without
	// the quiet wait.
	w.proxy.Quiet = 10 * time.Second
	began := time.Now()
	c := w.dial("198.51.100.5:25")
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "220 banner\r\n" {
		t.Fatalf("banner: %q, %v", line, err)
	}
	if waited := time.Since(began); waited > 5*time.Second {
		t.Errorf("the banner of port 25 came after %v: the proxy waited for the client", waited)
	}
	_, _ = fmt.Fprint(c, "\x00ping\n")
	if line, err := r.ReadString('\n'); err != nil || line != "\x00ping\n" {
		t.Errorf("echo: %q, %v", line, err)
	}

	refused := w.dial("203.0.113.5:25")
	_ = refused.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := refused.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Errorf("to an address no rule names: read %d, %v; want the connection ended", n, err)
	}
}

// A client slow to send its first bytes (a loaded sandbox's TLS library
// loading its roots before its ClientHello) to a name the policy allows is
// served, not refused for its silence: its address alone is refused, so
// the proxy waits longer to hear the name before it refuses.
func TestProxySlowClient(t *testing.T) {
	w := newWorld(t, netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"web.example", "198.51.100.0/24"}})
	w.proxy.Quiet = 100 * time.Millisecond
	webTLS := serve(t, true, "web over tls")
	webAddr := netip.MustParseAddr("203.0.113.10")
	w.names["web.example"] = []netip.Addr{webAddr}
	w.hosts[netip.AddrPortFrom(webAddr, 443)] = webTLS.Listener.Addr().String()

	conn := w.dial("203.0.113.10:443")
	time.Sleep(5 * w.proxy.Quiet)
	tc := tls.Client(conn, &tls.Config{ServerName: "web.example", InsecureSkipVerify: true}) // #nosec G402 -- the test server's certificate names 127.0.0.1, not web.example
	_, _ = fmt.Fprint(tc, "GET / HTTP/1.1\r\nHost: web.example\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("HTTPS to web.example, the hello sent after %v: %v", 5*w.proxy.Quiet, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "web over tls" {
		t.Errorf("HTTPS to web.example: %d %q", resp.StatusCode, body)
	}
	w.evMu.Lock()
	if len(w.events) != 0 {
		t.Errorf("refusals: %+v, want none", w.events)
	}
	w.evMu.Unlock()
}
