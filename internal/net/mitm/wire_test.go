package mitm

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Tests that speak to the interceptor byte by byte.

// roundTrip sends raw on a new connection and reads the response.
func roundTrip(t *testing.T, h *harness, raw string) (*http.Response, string) {
	t.Helper()
	c, err := h.dial("http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	go func() { _, _ = io.WriteString(c, raw) }() // a large one is not all read
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestUpgrade(t *testing.T) {
	t.Parallel()
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "hutch-echo" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		greeting := "auth-bad\n"
		if r.Header.Get("Authorization") == "Bearer "+v1 {
			greeting = "auth-ok\n"
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: hutch-echo\r\nConnection: Upgrade\r\n\r\n" + greeting)
		_ = brw.Flush()
		_, _ = io.Copy(c, brw.Reader) // echo until the client ends
	}
	h := newHarness(t, config{handler: http.HandlerFunc(handler), swaps: []Swap{{Placeholder: ph1, Value: v1}}})
	c, err := h.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: hutch-echo\r\nAuthorization: Bearer "+ph1+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "hutch-echo" {
		t.Fatalf("%v %v", resp, err)
	}
	if line, err := br.ReadString('\n'); line != "auth-ok\n" {
		t.Fatalf("host's first bytes %q %v: the request before the switch was not swapped", line, err)
	}
	for _, msg := range []string{"ping\n", "after the switch " + ph1 + " stays\n"} {
		_, _ = io.WriteString(c, msg)
		if line, err := br.ReadString('\n'); line != msg {
			t.Fatalf("echo %q %v, want %q", line, err, msg)
		}
	}
	// The client ends its side; the host's echo ends, and so does the
	// connection.
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after close: %q %v", rest, err)
	}
	if err := h.result(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestUpstreamFailure(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	count := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) })
	stranger := mustCA(t) // a CA the interceptor does not trust
	tests := []struct {
		name string
		cfg  config
		why  string
	}{
		{
			name: "untrusted certificate",
			cfg:  config{handler: count, cert: func(*CA) (*tls.Certificate, error) { return stranger.Leaf(apiHost) }},
			why:  "certificate signed by unknown authority",
		},
		{
			name: "certificate for another name",
			cfg:  config{handler: count, cert: func(ca *CA) (*tls.Certificate, error) { return ca.Leaf("other.test") }},
			why:  "valid for other.test, not api.test",
		},
		{
			name: "closed at once",
			cfg:  config{raw: func(*tls.Conn) {}},
			why:  "could not connect securely to api.test",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.swaps = []Swap{{Placeholder: ph1, Value: v1}}
			h := newHarness(t, tt.cfg)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+apiHost+"/", nil)
			req.Header.Set("Authorization", "Bearer "+ph1)
			resp, err := h.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), tt.why) || strings.Contains(string(b), v1) {
				t.Errorf("%d %q", resp.StatusCode, b)
			}
			if err := h.result(); err == nil || !strings.Contains(err.Error(), "handshake with the host") {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		if n := reached.Load(); n != 0 {
			t.Errorf("%d requests reached a host that failed its handshake", n)
		}
	})
}

func TestALPN(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config{handler: http.HandlerFunc(echo)})
	tests := []struct {
		name    string
		offered []string
		want    string
		fails   bool
	}{
		{name: "h2 and http/1.1 offered", offered: []string{"h2", "http/1.1"}, want: "http/1.1"},
		{name: "nothing offered", want: ""},
		{name: "h2 only", offered: []string{"h2"}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := h.dial(tt.offered...)
			if tt.fails {
				if err == nil {
					_ = c.Close()
					t.Fatal("handshake offering only h2 succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			if got := c.ConnectionState().NegotiatedProtocol; got != tt.want {
				t.Errorf("negotiated %q, want %q", got, tt.want)
			}
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("%v %v", resp, err)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 64<<10)
	tests := []struct {
		name   string
		swaps  []Swap
		raw    string
		status int
	}{
		{name: "absolute form", raw: "GET https://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", status: 400},
		{name: "CONNECT", raw: "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n", status: 400},
		{name: "TRACE", raw: "TRACE / HTTP/1.1\r\nHost: api.test\r\n\r\n", status: 405},
		{name: "another host", raw: "GET / HTTP/1.1\r\nHost: evil.test\r\nAuthorization: Bearer " + ph1 + "\r\n\r\n", status: 421},
		{name: "another host with a port", raw: "GET / HTTP/1.1\r\nHost: api.test.evil.test:443\r\n\r\n", status: 421},
		{name: "no Host", raw: "GET / HTTP/1.0\r\n\r\n", status: 400},
		{name: "HTTP/2 preface", raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: 505},
		{name: "not HTTP", raw: "HELLO\r\n\r\n", status: 400},
		{name: "head too large", raw: "GET / HTTP/1.1\r\nHost: api.test\r\nX-Big: " + strings.Repeat("y", 1<<20) + "\r\n\r\n", status: 431},
		{
			name:  "swaps would make the head too large",
			swaps: []Swap{{Placeholder: ph1, Value: big}},
			raw:   "GET / HTTP/1.1\r\nHost: api.test\r\nX-Many-Token: " + strings.Repeat(ph1+" ", 20) + "\r\n\r\n", status: 431,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var reached atomic.Int64
			h := newHarness(t, config{
				handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }),
				swaps:   tt.swaps,
			})
			resp, body := roundTrip(t, h, tt.raw)
			if resp.StatusCode != tt.status || !resp.Close || !strings.HasPrefix(body, "hutch: ") {
				t.Errorf("%d (close %v) %q, want %d", resp.StatusCode, resp.Close, body, tt.status)
			}
			if err := h.result(); err == nil {
				t.Error("Serve returned no error")
			}
			if reached.Load() != 0 {
				t.Error("the request reached the host")
			}
		})
	}
}

func TestCloseDelimitedResponse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config{raw: func(c *tls.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
	}})
	resp, err := h.client().Get("https://" + apiHost + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "until the end" || err != nil || !resp.Close {
		t.Errorf("%q %v close %v", b, err, resp.Close)
	}
	if err := h.result(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestMalformedResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply func(auth string) string
	}{
		{name: "status line", reply: func(string) string { return "HTTP/1.1 abc\r\n\r\n" }},
		// A host that echoes the value into a broken header line: the
		// parse error quotes the line, and must not be passed on.
		{name: "header echoing the value", reply: func(auth string) string { return "HTTP/1.1 200 OK\r\nBroken " + auth + "\r\n\r\n" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, config{
				swaps: []Swap{{Placeholder: ph1, Value: v1}},
				raw: func(c *tls.Conn) {
					req, err := http.ReadRequest(bufio.NewReader(c))
					if err != nil {
						return
					}
					_, _ = io.WriteString(c, tt.reply(req.Header.Get("Authorization")))
				},
			})
			resp, body := roundTrip(t, h, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "+ph1+"\r\n\r\n")
			if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, v1) {
				t.Errorf("%d %q", resp.StatusCode, body)
			}
			err := h.result()
			if err == nil || !errors.Is(err, errMalformed) || strings.Contains(err.Error(), v1) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

func TestHostClosesIdleConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config{handler: http.HandlerFunc(echo), idleTimeout: 200 * time.Millisecond})
	c, err := h.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	// The host drops the idle connection; the sandbox's ends with it
	// (dial set a 10 s deadline).
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection: %v, want EOF", err)
	}
	if err := h.result(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}
