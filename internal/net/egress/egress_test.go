package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests run everything on loopback. Loopback is inward, so most of
// them let the proxy dial it with loopbackOnly instead of Outward.
func loopbackOnly(a netip.Addr) bool { return a.IsLoopback() }

// echoServer is a TCP server on 127.0.0.1 that sends back whatever it
// reads and, when the client half-closes, closes its side.
type echoServer struct {
	addr     string // 127.0.0.1:port
	port     string
	accepted atomic.Int32
	probes   int32         // connections connectionsSoFar made
	ended    chan struct{} // gets a value each time a connection ends
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: ln.Addr().String(), ended: make(chan struct{}, 16)}
	_, e.port, _ = net.SplitHostPort(e.addr)

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(c, c) // ends when the client half-closes or the test closes c
				c.Close()
				e.ended <- struct{}{}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return e
}

// connectionsSoFar returns how many connections the server has accepted,
// not counting the ones it made itself to find out. It connects to the server
// itself and waits for its echo: connections are accepted in the order
// they arrive, so by then any connection the proxy made earlier has been
// accepted and counted too.
func (e *echoServer) connectionsSoFar(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	e.probes++
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("echo server did not answer: %v", err)
	}
	return int(e.accepted.Load() - e.probes)
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	slow string // a line containing this is written only after a pause
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	slow := b.slow != "" && bytes.Contains(p, []byte(b.slow))
	b.mu.Unlock()
	if slow {
		time.Sleep(300 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// slowDown makes lines containing s take a while to be written.
func (b *syncBuffer) slowDown(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slow = s
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningProxy is a Proxy served on 127.0.0.1 by Serve.
type runningProxy struct {
	addr   string
	logs   *syncBuffer
	stop   context.CancelFunc // cancels Serve's context
	served chan error         // gets what Serve returned
}

// startProxy serves p on a new loopback listener, logging at Debug into
// the returned logs, and checks at cleanup that Serve stops cleanly.
func startProxy(t *testing.T, p *Proxy) *runningProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningProxy{addr: ln.Addr().String(), logs: logs, stop: cancel, served: make(chan error, 1)}
	go func() { rp.served <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-rp.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5 s of its context ending")
		}
	})
	return rp
}

// send writes raw to a new connection to the proxy and reads the response
// to a request with the given method. It returns the connection and a
// reader positioned just after the response's headers: after a successful
// CONNECT, the tunnel's bytes come from there.
func send(t *testing.T, proxyAddr, method, raw string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read the proxy's response: %v", err)
	}
	return c, br, resp
}

// connect asks the proxy for a tunnel to target, with early sent in the
// same write as the request.
func connect(t *testing.T, proxyAddr, target, early string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	return send(t, proxyAddr, http.MethodConnect,
		"CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"+early)
}

// body reads a (small) response body.
func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return string(b)
}

// readN reads exactly n bytes from r.
func readN(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("read %d bytes through the tunnel: %v", n, err)
	}
	return string(b)
}

func TestConnectTunnelsBothWays(t *testing.T) {
	echo := startEcho(t)
	tests := []struct {
		name   string
		allow  string
		target string
	}{
		{"ip literal", "127.0.0.1:" + echo.port, "127.0.0.1:" + echo.port},
		{"name resolved", "localhost:" + echo.port, "localhost:" + echo.port},
		{"name in another case", "localhost:" + echo.port, "LocalHost:" + echo.port},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := startProxy(t, &Proxy{Allow: []string{tt.allow}, AllowIP: loopbackOnly})

			// "early;" goes in the same write as the CONNECT request, so
			// the proxy's HTTP server has it buffered when the tunnel starts.
			c, br, resp := connect(t, proxy.addr, tt.target, "early;")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("CONNECT %s: status %d, want 200", tt.target, resp.StatusCode)
			}
			if got := readN(t, br, len("early;")); got != "early;" {
				t.Fatalf("bytes sent with the CONNECT came back as %q, want %q", got, "early;")
			}
			if _, err := io.WriteString(c, "hello"); err != nil {
				t.Fatal(err)
			}
			if got := readN(t, br, len("hello")); got != "hello" {
				t.Fatalf("echo through the tunnel: got %q, want %q", got, "hello")
			}

			// Half-close right after a last write: the tunnel must still
			// bring back the echo of "bye", then the server's end-of-stream
			// (it closes when it sees the client's).
			if _, err := io.WriteString(c, "bye"); err != nil {
				t.Fatal(err)
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatalf("after the client's half-close, reading the tunnel: %v (want end-of-stream)", err)
			}
			if string(rest) != "bye" {
				t.Fatalf("after the client's half-close the tunnel gave %q, want %q then end-of-stream", rest, "bye")
			}
			if !strings.Contains(proxy.logs.String(), "egress tunnel open") {
				t.Errorf("no Debug log line for the tunnel; logs:\n%s", proxy.logs)
			}
		})
	}
}

func TestConnectRefusesUnlisted(t *testing.T) {
	echo := startEcho(t)
	tests := []struct {
		name   string
		allow  []string
		target string
	}{
		{"other port", []string{"127.0.0.1:1"}, "127.0.0.1:" + echo.port},
		{"nothing allowed", nil, "127.0.0.1:" + echo.port},
		// An address is allowed only when written literally in Allow, even
		// if an allowed name resolves to it.
		{"ip literal of an allowed name", []string{"localhost:" + echo.port}, "127.0.0.1:" + echo.port},
		{"name of an allowed address", []string{"127.0.0.1:" + echo.port}, "localhost:" + echo.port},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxy := startProxy(t, &Proxy{Allow: tt.allow, AllowIP: loopbackOnly})
			_, _, resp := connect(t, proxy.addr, tt.target, "")
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403", resp.StatusCode)
			}
			msg := body(t, resp)
			if !strings.Contains(msg, tt.target) {
				t.Errorf("body %q does not name the refused destination %s", msg, tt.target)
			}
			for _, a := range tt.allow {
				if !strings.Contains(msg, a) {
					t.Errorf("body %q does not list the allowed destination %s", msg, a)
				}
			}
			if strings.Count(strings.TrimSuffix(msg, "\n"), "\n") != 0 {
				t.Errorf("body %q is not one line", msg)
			}
			if n := echo.connectionsSoFar(t); n != 0 {
				t.Errorf("the target saw %d connections, want none", n)
			}
			if logs := proxy.logs.String(); !strings.Contains(logs, "level=INFO") || !strings.Contains(logs, "not in allow list") {
				t.Errorf("the refusal was not logged at Info with its reason; logs:\n%s", logs)
			}
		})
	}
}

func TestConnectRefusesInwardAddresses(t *testing.T) {
	echo := startEcho(t)
	for _, allow := range []string{"localhost:" + echo.port, "127.0.0.1:" + echo.port} {
		t.Run(allow, func(t *testing.T) {
			// AllowIP nil: Outward decides, and loopback is inward.
			proxy := startProxy(t, &Proxy{Allow: []string{allow}})
			_, _, resp := connect(t, proxy.addr, allow, "")
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403", resp.StatusCode)
			}
			msg := body(t, resp)
			if !strings.Contains(msg, "host's own or private networks") {
				t.Errorf("body %q does not say the address is inward", msg)
			}
			if n := echo.connectionsSoFar(t); n != 0 {
				t.Errorf("the target saw %d connections, want none", n)
			}
		})
	}
}

func TestConnectUnreachableIsBadGateway(t *testing.T) {
	// A port nobody listens on: take one, then free it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()

	proxy := startProxy(t, &Proxy{Allow: []string{target}, AllowIP: loopbackOnly})
	_, _, resp := connect(t, proxy.addr, target, "")
	msg := body(t, resp)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502; body %q", resp.StatusCode, msg)
	}
	if !strings.Contains(msg, "connect to "+target) || !strings.Contains(msg, "refused") {
		t.Errorf("body %q does not give the connection error", msg)
	}
}

func TestForwardHTTP(t *testing.T) {
	type seen struct {
		method, uri, body string
		header            http.Header
	}
	var (
		mu   sync.Mutex
		reqs []seen
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, seen{r.Method, r.RequestURI, string(b), r.Header.Clone()})
		mu.Unlock()
		w.Header().Set("X-From", "upstream")
		_, _ = fmt.Fprintf(w, "hello from upstream: %s", b)
	}))
	t.Cleanup(upstream.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the server not in Allow got a request for %s", r.URL)
	}))
	t.Cleanup(other.Close)

	upHost := strings.TrimPrefix(upstream.URL, "http://") // 127.0.0.1:port
	_, upPort, _ := net.SplitHostPort(upHost)
	proxy := startProxy(t, &Proxy{Allow: []string{upHost}, AllowIP: loopbackOnly})
	client := &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: proxy.addr}),
		DisableKeepAlives: true,
	}}
	t.Cleanup(client.CloseIdleConnections)

	t.Run("allowed", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, upstream.URL+"/pkg?v=1", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0LXRva2Vu")
		req.Header.Set("Connection", "X-Hop")
		req.Header.Set("X-Hop", "for the proxy only")
		req.Header.Set("X-Keep", "yes")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := body(t, resp)
		if resp.StatusCode != http.StatusOK || got != "hello from upstream: payload" {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, got, "hello from upstream: payload")
		}
		if resp.Header.Get("X-From") != "upstream" {
			t.Errorf("response header X-From not passed back")
		}

		mu.Lock()
		defer mu.Unlock()
		if len(reqs) != 1 {
			t.Fatalf("upstream got %d requests, want 1", len(reqs))
		}
		r := reqs[0]
		if r.method != http.MethodPost || r.uri != "/pkg?v=1" {
			t.Errorf("upstream got %s %s, want POST /pkg?v=1", r.method, r.uri)
		}
		for _, h := range []string{"Proxy-Authorization", "X-Hop"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("hop-by-hop header %s reached the server: %q", h, v)
			}
		}
		if r.header.Get("X-Keep") != "yes" {
			t.Errorf("end-to-end header X-Keep was dropped")
		}
		if strings.Contains(proxy.logs.String(), "c2VjcmV0LXRva2Vu") {
			t.Errorf("the proxy logged a request header; logs:\n%s", proxy.logs)
		}
	})

	refused := []struct {
		name, url, want string
	}{
		{"not in Allow", other.URL + "/", strings.TrimPrefix(other.URL, "http://")},
		// Allowed by name, but localhost is inward: the transport's
		// dial checks addresses too. (This proxy's AllowIP admits loopback,
		// so a second proxy with the default is used below.)
		{"inward address", "http://localhost:" + upPort + "/", "host's own or private networks"},
	}
	strict := startProxy(t, &Proxy{Allow: []string{upHost, "localhost:" + upPort}})
	strictClient := &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: strict.addr}),
		DisableKeepAlives: true,
	}}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := strictClient.Get(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			msg := body(t, resp)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403; body %q", resp.StatusCode, msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("body %q does not contain %q", msg, tt.want)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 1 {
		t.Errorf("upstream got %d requests in all, want 1 (the refused ones must not reach it)", len(reqs))
	}
}

func TestNotProxyRequestIsBadRequest(t *testing.T) {
	proxy := startProxy(t, &Proxy{Allow: []string{"127.0.0.1:80", "example.org:443"}, AllowIP: loopbackOnly})
	tests := []struct {
		name, method, raw string
	}{
		{"origin-form GET", http.MethodGet, "GET / HTTP/1.1\r\nHost: " + proxy.addr + "\r\n\r\n"},
		{"CONNECT without port", http.MethodConnect, "CONNECT example.org HTTP/1.1\r\nHost: example.org\r\n\r\n"},
		{"CONNECT to bad port", http.MethodConnect, "CONNECT example.org:0 HTTP/1.1\r\nHost: example.org:0\r\n\r\n"},
		{"absolute https URL", http.MethodGet, "GET https://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, resp := send(t, proxy.addr, tt.method, tt.raw)
			msg := body(t, resp)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %q", resp.StatusCode, msg)
			}
			if !strings.HasPrefix(msg, "egress proxy: ") {
				t.Errorf("body %q is not the proxy's explanation", msg)
			}
		})
	}
}

func TestServeStopsTunnels(t *testing.T) {
	echo := startEcho(t)
	proxy := startProxy(t, &Proxy{Allow: []string{"127.0.0.1:" + echo.port}, AllowIP: loopbackOnly})
	c, br, resp := connect(t, proxy.addr, "127.0.0.1:"+echo.port, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: status %d, want 200", resp.StatusCode)
	}
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, br, 4); got != "ping" {
		t.Fatalf("echo through the tunnel: got %q", got)
	}

	// The tunnel's handler is made slow to finish (its last act is this
	// log line), so a Serve that did not wait for it would return first.
	proxy.logs.slowDown("egress tunnel closed")
	proxy.stop()
	select {
	case err := <-proxy.served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Serve did not return within 2 s of its context ending")
	}
	proxy.served <- nil // for startProxy's cleanup

	// Serve returns only once its handlers have.
	if !strings.Contains(proxy.logs.String(), "egress tunnel closed") {
		t.Errorf("Serve returned before the tunnel's handler; logs:\n%s", proxy.logs)
	}
	if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := br.ReadByte()
	if err == nil {
		t.Fatal("the tunnel still delivers bytes after Serve stopped")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the tunnel was not closed within 2 s of Serve stopping")
	}
	select {
	case <-echo.ended:
	case <-time.After(2 * time.Second):
		t.Fatal("the tunnel's connection to the target was not closed")
	}
	if c, err := net.DialTimeout("tcp", proxy.addr, time.Second); err == nil {
		c.Close()
		t.Error("the listener still accepts connections after Serve returned")
	}
}

func TestServeReturnsWhenListenerClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- (&Proxy{}).Serve(context.Background(), ln) }()
	ln.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v, want nil after its listener was closed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Serve did not return after its listener was closed")
	}
}

func TestServeReportsBadAllowEntries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Allow: []string{"registry.npmjs.org", "ok.example:443", "bad host:443", "*.1.2.3.4:443"}}
	err = p.Serve(context.Background(), ln)
	if err == nil {
		t.Fatal("Serve accepted malformed Allow entries")
	}
	for _, want := range []string{`"registry.npmjs.org": want host:port`, `"bad host:443"`, `"*.1.2.3.4:443"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.example") {
		t.Errorf("error %q reports a good entry", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve left its listener open (Accept: %v)", err)
	}
}

func TestOutsideIP(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"100.128.0.1", true}, // just past CGNAT
		{"172.32.0.1", true},  // just past 172.16.0.0/12
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::808:808", true}, // NAT64 of 8.8.8.8

		{"127.0.0.1", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"::", false},
		{"fe80::1", false},
		{"fc00::1", false},
		{"fd00:ec2::254", false}, // AWS metadata over IPv6
		{"224.0.0.1", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		{"240.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"192.0.2.1", true}, // documentation: some networks use it
		{"198.18.0.1", false},
		{"198.51.100.1", true},    // documentation: some networks use it
		{"203.0.113.1", true},     // documentation: some networks use it
		{"2001:db8::1", true},     // documentation: some networks use it
		{"64:ff9b::a00:1", false}, // NAT64 of 10.0.0.1
		{"2002:a00:1::1", false},  // 6to4 of 10.0.0.1
		{"2001::1", false},        // Teredo
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := OutsideIP(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("OutsideIP(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
	if OutsideIP(netip.Addr{}) {
		t.Error("the zero Addr is outside")
	}
}

// TestOutwardRefusesHostNetworks: the host's own addresses and their
// networks are never dialled, whatever range they are in.
func TestOutwardRefusesHostNetworks(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		if Outward(ip) {
			t.Errorf("Outward(%s), an address of this host, = true", ip)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("this host has no interface addresses to check")
	}
	if !Outward(netip.MustParseAddr("8.8.8.8")) && !onHostNetwork(t, "8.8.8.8") {
		t.Error("Outward(8.8.8.8) = false")
	}
}

// onHostNetwork reports whether addr is on one of this host's networks.
func onHostNetwork(t *testing.T, addr string) bool {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.Contains(net.ParseIP(addr)) {
			return true
		}
	}
	return false
}

func TestAllowMatching(t *testing.T) {
	p := &Proxy{Allow: []string{"*.example.org:443", "registry.npmjs.org:443", "[::1]:8080"}}
	tests := []struct {
		dest string
		want bool
	}{
		{"a.example.org:443", true},
		{"a.b.example.org:443", true},
		{"A.Example.ORG:443", true},
		{"example.org:443", false},
		{"a.example.org:80", false},
		{"evilexample.org:443", false},
		{"a.example.org.evil.com:443", false},
		{".example.org:443", false},
		{"a.example.org.:443", false}, // trailing dot: not a name this proxy accepts
		{"registry.npmjs.org:443", true},
		{"REGISTRY.npmjs.org:0443", true},
		{"sub.registry.npmjs.org:443", false},
		{"[::1]:8080", true},
		{"[0:0::1]:8080", true}, // the same address, written differently
		{"127.0.0.1:8080", false},
	}
	for _, tt := range tests {
		t.Run(tt.dest, func(t *testing.T) {
			host, port, err := net.SplitHostPort(tt.dest)
			if err != nil {
				t.Fatal(err)
			}
			d, err := newDest(host, port)
			if got := err == nil && p.allowed(d); got != tt.want {
				t.Errorf("allowed(%s) = %v, want %v (newDest error: %v)", tt.dest, got, tt.want, err)
			}
		})
	}
}
