package preview

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeSandbox is a sandbox whose loopback ports are listeners of the
// test: what listens on a port is in ports.
type fakeSandbox struct {
	mu        sync.Mutex
	ports     map[int]string // port → the test's listener address
	transport *http.Transport
	dials     atomic.Int32
}

func newFakeSandbox(t *testing.T) *fakeSandbox {
	sb := &fakeSandbox{ports: map[int]string{}}
	sb.transport = &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		return sb.DialPort(ctx, port)
	}}
	t.Cleanup(sb.transport.CloseIdleConnections)
	return sb
}

// listen has port served by h.
func (sb *fakeSandbox) listen(t *testing.T, port int, h http.Handler) {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	sb.mu.Lock()
	sb.ports[port] = srv.Listener.Addr().String()
	sb.mu.Unlock()
}

func (sb *fakeSandbox) Ports() http.RoundTripper { return sb.transport }

func (sb *fakeSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	sb.dials.Add(1)
	sb.mu.Lock()
	addr, ok := sb.ports[port]
	sb.mu.Unlock()
	if !ok {
		return nil, errdefs.FailedPrecondition("nothing listens on port %d in the sandbox", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (sb *fakeSandbox) Err(_ context.Context, err error) error { return err }

func (sb *fakeSandbox) Woken() bool { return false }

// wokenSandbox is the fake sandbox as a hold that woke it.
type wokenSandbox struct{ *fakeSandbox }

func (wokenSandbox) Woken() bool { return true }

// fakeCore holds the fake sandbox "sb1", counting holds; wake, when not
// nil, is waited for by each Acquire (a sandbox being woken).
type fakeCore struct {
	sb    *fakeSandbox
	holds atomic.Int32
	wake  chan struct{}
}

func (c *fakeCore) acquire(ctx context.Context, id string) (Sandbox, func(), error) {
	if id != "sb1" {
		return nil, nil, errdefs.NotFound("sandbox %s not found", id)
	}
	var sb Sandbox = c.sb
	if c.wake != nil {
		select {
		case <-c.wake:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		sb = wokenSandbox{c.sb}
	}
	c.holds.Add(1)
	var once sync.Once
	return sb, func() { once.Do(func() { c.holds.Add(-1) }) }, nil
}

// front serves the proxy as the API does with path routing:
// /sb/{id}/{port}/… with the caller's key stripped.
func front(t *testing.T, p *Proxy) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/sb/{id}/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		port, _ := strconv.Atoi(r.PathValue("port"))
		prefix := "/sb/" + r.PathValue("id") + "/" + r.PathValue("port")
		err := p.Serve(w, r, Target{Sandbox: r.PathValue("id"), Port: port, Prefix: prefix, StripAuthorization: true})
		if err != nil {
			http.Error(w, errdefs.Kind(err).Error()+": "+err.Error(), http.StatusBadGateway)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func setup(t *testing.T) (*fakeCore, *httptest.Server, *http.Client) {
	t.Helper()
	core := &fakeCore{sb: newFakeSandbox(t)}
	p := New(Config{Acquire: core.acquire, WakePage: 50 * time.Millisecond, ListenWait: 5 * time.Second})
	srv := front(t, p)
	c := srv.Client()
	t.Cleanup(c.CloseIdleConnections)
	return core, srv, c
}

func get(t *testing.T, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// The sandbox's server gets the request under the prefix, with its query
// and its escapes, its Host, where it came from, and nothing of Hutch's;
// a cookie it sets under Hutch's names does not reach the client. The
// sandbox is held while the request is served, and no longer.
func TestProxyRequest(t *testing.T) {
	core, srv, c := setup(t)
	var seen *http.Request
	var heldDuring int32
	core.sb.listen(t, 3000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, heldDuring = r.Clone(context.Background()), core.holds.Load()
		http.SetCookie(w, &http.Cookie{Name: "hutch_preview", Value: "forged"})
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "app"})
		_, _ = io.WriteString(w, "hello from the sandbox")
	}))
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/a/b%2Fc?x=1&y=2", nil)
	req.Host = "3000-sb1.localhost:7070"
	req.Header.Set("Authorization", "Bearer hutch_key")
	req.Header.Set("Hutch-User", "alice")
	req.Header.Set("hutch-workspace", "w1")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("X-App", "kept")
	req.Header.Add("Cookie", "hutch_preview=secret; theme=dark")
	req.Header.Add("Cookie", "HUTCH_other=x; sid=1")
	status, h, body := get(t, c, req)
	if status != http.StatusOK || body != "hello from the sandbox" {
		t.Fatalf("%d %q", status, body)
	}
	if got := h.Values("Set-Cookie"); len(got) != 1 || !strings.HasPrefix(got[0], "session=") {
		t.Errorf("Set-Cookie reaching the client: %q", got)
	}
	if heldDuring != 1 {
		t.Errorf("holds during the request = %d, want 1", heldDuring)
	}
	waitHolds(t, core, 0) // released once the handler returns, just after the body
	if seen.URL.EscapedPath() != "/a/b%2Fc" || seen.URL.RawQuery != "x=1&y=2" {
		t.Errorf("path %q query %q", seen.URL.EscapedPath(), seen.URL.RawQuery)
	}
	if seen.Host != "3000-sb1.localhost:7070" || seen.Header.Get("X-Forwarded-Host") != "3000-sb1.localhost:7070" ||
		seen.Header.Get("X-Forwarded-Proto") != "http" || seen.Header.Get("X-Forwarded-For") != "127.0.0.1" ||
		seen.Header.Get("X-Forwarded-Prefix") != "/sb/sb1/3000" {
		t.Errorf("host %q, forwarded headers %v", seen.Host, seen.Header)
	}
	for _, name := range []string{"Authorization", "Hutch-User", "Hutch-Workspace"} {
		if v := seen.Header.Get(name); v != "" {
			t.Errorf("%s reached the sandbox: %q", name, v)
		}
	}
	if got := seen.Header.Values("Cookie"); len(got) != 1 || got[0] != "theme=dark; sid=1" {
		t.Errorf("cookies reaching the sandbox: %q", got)
	}
	if seen.Header.Get("X-App") != "kept" {
		t.Error("the app's own header was dropped")
	}
}

// Errors are returned for the caller to answer: a sandbox not found, a
// port nothing listens on (bad_gateway), a server that hangs up.
func TestProxyErrors(t *testing.T) {
	core, srv, c := setup(t)
	core.sb.listen(t, 4000, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, _ := http.NewResponseController(w).Hijack()
		_ = conn.Close()
	}))
	for _, tt := range []struct{ path, want string }{
		{"/sb/nope/3000/", "not_found: sandbox nope not found"},
		{"/sb/sb1/3000/", "bad_gateway: sandbox sb1: nothing listens on port 3000 in the sandbox"},
		{"/sb/sb1/4000/", "bad_gateway: sandbox sb1: the server on port 4000 closed the connection without a complete answer"},
		{"/sb/sb1/70000/", "invalid_argument: port must be from 1 to 65535, got 70000"},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
		if status, _, body := get(t, c, req); status != http.StatusBadGateway || strings.TrimSpace(body) != tt.want {
			t.Errorf("%s: %d %q, want %q", tt.path, status, body, tt.want)
		}
	}
	waitHolds(t, core, 0)
}

// An event stream's events arrive as they are written, and the sandbox
// is held until the stream ends.
func TestProxyEventStream(t *testing.T) {
	core, srv, c := setup(t)
	next := make(chan struct{})
	core.sb.listen(t, 3000, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			_, _ = io.WriteString(w, "data: "+string(rune('a'+i))+"\n\n")
			_ = http.NewResponseController(w).Flush()
			<-next
		}
	}))
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := r.ReadString('\n')
		if err != nil || line != "data: "+string(rune('a'+i))+"\n" {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		_, _ = r.ReadString('\n')
		if n := core.holds.Load(); n != 1 {
			t.Errorf("holds while the stream is open = %d, want 1", n)
		}
		next <- struct{}{}
	}
	_, _ = io.Copy(io.Discard, r)
	waitHolds(t, core, 0)
}

// A WebSocket goes through, and holds the sandbox while it is open.
func TestProxyWebSocket(t *testing.T) {
	core, srv, _ := setup(t)
	core.sb.listen(t, 5173, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer func() { _ = ws.CloseNow() }()
		for {
			typ, msg, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			if err := ws.Write(r.Context(), typ, append([]byte("echo "), msg...)); err != nil {
				return
			}
		}
	}))
	ctx := t.Context()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/sb/sb1/5173/hmr", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"one", "two"} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, got, err := ws.Read(ctx); err != nil || string(got) != "echo "+msg {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	if n := core.holds.Load(); n != 1 {
		t.Errorf("holds while the WebSocket is open = %d, want 1", n)
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	waitHolds(t, core, 0)
}

// A browser's page load that waits for a wake longer than WakePage gets
// the waking page, and the wake goes on; other requests wait for it.
// Once woken, requests wait for the port to listen.
func TestWake(t *testing.T) {
	core, srv, c := setup(t)
	core.wake = make(chan struct{})
	page, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/", nil)
	page.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	status, h, body := get(t, c, page)
	if status != http.StatusOK || h.Get(HeaderPreview) != "waking" || h.Get("Cache-Control") != "no-store" ||
		!strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, "sb1") {
		t.Fatalf("the page load while waking: %d %v %q", status, h, body)
	}

	served := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/api", nil)
		resp, err := c.Do(req)
		if err != nil {
			served <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		served <- string(b)
	}()
	time.Sleep(100 * time.Millisecond) // longer than WakePage: it still waits
	select {
	case got := <-served:
		t.Fatalf("a request that is not a page load was answered before the wake: %q", got)
	default:
	}
	// The sandbox wakes; its server listens a little later.
	close(core.wake)
	time.Sleep(50 * time.Millisecond)
	core.sb.listen(t, 3000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "app "+r.URL.Path)
	}))
	if got := <-served; got != "app /api" {
		t.Fatalf("the request after the wake: %q", got)
	}
	if core.sb.dials.Load() < 2 {
		t.Errorf("%d dials: the port was not waited for", core.sb.dials.Load())
	}
	waitHolds(t, core, 0)
}

func waitHolds(t *testing.T, core *fakeCore, want int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for core.holds.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("holds = %d, want %d", core.holds.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParseHost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host, domain string
		want         Target
		ok           bool
	}{
		{"3000-abc123.localhost", "localhost", Target{Sandbox: "abc123", Port: 3000}, true},
		{"3000-abc123.localhost:7070", "localhost", Target{Sandbox: "abc123", Port: 3000}, true},
		{"8080-ABC123.Preview.Example.com.", "preview.example.com", Target{Sandbox: "abc123", Port: 8080}, true},
		{"localhost:7070", "localhost", Target{}, false},
		{"127.0.0.1:7070", "localhost", Target{}, false},
		{"3000-abc.other.localhost", "localhost", Target{}, false},
		{"3000-abc.notlocalhost", "localhost", Target{}, false},
		{"03000-abc.localhost", "localhost", Target{}, false},
		{"0-abc.localhost", "localhost", Target{}, false},
		{"70000-abc.localhost", "localhost", Target{}, false},
		{"3000.localhost", "localhost", Target{}, false},
		{"3000-.localhost", "localhost", Target{}, false},
		{"abc-3000.localhost", "localhost", Target{}, false},
		{"3000-a_b.localhost", "localhost", Target{}, false},
		{"[::1]:7070", "localhost", Target{}, false},
	} {
		got, ok := ParseHost(tt.host, tt.domain)
		if got.Sandbox != tt.want.Sandbox || got.Port != tt.want.Port || ok != tt.ok {
			t.Errorf("ParseHost(%q, %q) = %+v, %v; want %+v, %v", tt.host, tt.domain, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCheckDomain(t *testing.T) {
	t.Parallel()
	for domain, ok := range map[string]bool{
		"localhost": true, "preview.example.com": true, "a-b.example": true,
		"": false, "Example.com": false, "localhost:7070": false, "-a.com": false, "a..com": false, "*.example.com": false,
	} {
		if err := CheckDomain(domain); (err == nil) != ok {
			t.Errorf("CheckDomain(%q) = %v", domain, err)
		}
	}
}
