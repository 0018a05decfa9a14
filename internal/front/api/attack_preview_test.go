package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/preview"
)

// Attacks across the boundary "preview page → console and API"
// (docs/security.md): the API's listener with the real preview proxy, in
// front of a sandbox whose ports are listeners of the test.

// portsSandbox is a preview.Sandbox whose loopback port 3000 is app.
type portsSandbox struct {
	app       string // the app's listener address
	transport *http.Transport
}

func newPortsSandbox(t *testing.T, app http.Handler) *portsSandbox {
	t.Helper()
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	sb := &portsSandbox{app: srv.Listener.Addr().String()}
	sb.transport = &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		return sb.DialPort(ctx, port)
	}}
	t.Cleanup(sb.transport.CloseIdleConnections)
	return sb
}

func (sb *portsSandbox) Ports() http.RoundTripper { return sb.transport }

func (sb *portsSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port != 3000 {
		return nil, errdefs.FailedPrecondition("nothing listens on port %d in the sandbox", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", sb.app)
}

func (sb *portsSandbox) Err(_ context.Context, err error) error { return err }

func (sb *portsSandbox) Woken() bool { return false }

// appSeen is what the app in the sandbox was sent.
type appSeen struct {
	mu      sync.Mutex
	headers []http.Header
}

func (a *appSeen) add(h http.Header) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.headers = append(a.headers, h.Clone())
}

func (a *appSeen) last() http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.headers) == 0 {
		return nil
	}
	return a.headers[len(a.headers)-1]
}

// previewServer is the API with the real preview proxy over one sandbox
// (every id reaches it) whose port 3000 is app, preview links signed by
// links.
func previewServer(t *testing.T, app http.Handler, configure ...func(*Config)) (*testServer, *download.Signer) {
	t.Helper()
	sb := newPortsSandbox(t, app)
	links := download.NewSignerFor(testKey, "preview links")
	proxy := preview.New(preview.Config{
		Domain: preview.DefaultDomain,
		Acquire: func(context.Context, string) (preview.Sandbox, func(), error) {
			return sb, func() {}, nil
		},
	})
	s := newTestServer(t, append([]func(*Config){func(c *Config) { c.Previews, c.PreviewLinks = proxy, links }}, configure...)...)
	return s, links
}

// linkToken is a preview link's token for port 3000 of sandbox id.
func linkToken(t *testing.T, links *download.Signer, id string) string {
	t.Helper()
	tok, err := links.Sign(download.Claim{Sandbox: id, Path: "/", Port: 3000, Expires: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do makes a request with headers and returns its answer, read.
func do(t *testing.T, method, url string, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(body)
}

// Hutch's credentials never reach the sandbox's server: the key a browser
// offers as a WebSocket subprotocol (finding 10), the key in
// Authorization (the caller's, or one the daemon does not know any more,
// beside a link's cookie), the link's cookies, Hutch's headers; and a
// cookie of Hutch's names the app sets never reaches the browser.
func TestAttackPreviewCredentialsNotForwarded(t *testing.T) {
	t.Parallel()
	seen := &appSeen{}
	s, links := previewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.Header)
		if r.Header.Get("Upgrade") != "" {
			ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
			if err == nil {
				_ = ws.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "hutch_preview", Value: "forged", Path: "/"})
		http.SetCookie(w, &http.Cookie{Name: "app", Value: "1"})
		_, _ = io.WriteString(w, "app")
	}))
	a := s.keyIn(t, "app-a", "ws-a")
	id := previewSandbox(t, a.Client)
	pathURL := s.url + "/v1/sandboxes/" + id + "/ports/3000/"
	host := "3000-" + id + ".localhost"
	tok := linkToken(t, links, id)

	// A browser's WebSocket, authenticated by its key as a subprotocol.
	ws := "ws" + strings.TrimPrefix(pathURL, "http") + "socket"
	conn, _, err := websocket.Dial(t.Context(), ws, &websocket.DialOptions{Subprotocols: []string{"hutch.v1", "hutch.bearer." + a.key}})
	if err != nil {
		t.Fatalf("a WebSocket with the key as a subprotocol: %v", err)
	}
	_ = conn.CloseNow()
	if got := seen.last(); strings.Contains(strings.Join(got.Values("Sec-WebSocket-Protocol"), ","), a.key) {
		t.Errorf("the key offered as a subprotocol reached the sandbox: %q", got.Values("Sec-WebSocket-Protocol"))
	}
	if conn.Subprotocol() != "hutch.v1" {
		t.Errorf("the upgrade picked %q, want hutch.v1 (a browser drops one that picks none)", conn.Subprotocol())
	}

	for _, tc := range []struct {
		name    string
		url     string
		headers map[string]string
	}{
		{"the key, by path", pathURL, map[string]string{"Authorization": "Bearer " + a.key, "Hutch-User": "alice", "Cookie": "hutch_preview=" + tok}},
		{"the key, by host", s.url + "/", map[string]string{"Host": host, "Authorization": "Bearer " + a.key, "Hutch-User": "alice"}},
		{"a link and a deleted key, by path", pathURL, map[string]string{"Authorization": "Bearer hutch_0123456789abcdef", "Cookie": "hutch_preview=" + tok + "; sid=1"}},
		{"a link and a deleted key, by host", s.url + "/", map[string]string{"Host": host, "Authorization": "Bearer hutch_0123456789abcdef", "X-Api-Key": "e2b_0123", "Cookie": "hutch_preview_embed=" + tok}},
	} {
		status, h, body := do(t, http.MethodGet, tc.url, tc.headers)
		if status != http.StatusOK || body != "app" {
			t.Errorf("%s: %d %s", tc.name, status, body)
			continue
		}
		got := seen.last()
		for _, name := range []string{"Authorization", "X-Api-Key", "Hutch-User"} {
			if v := got.Get(name); v != "" {
				t.Errorf("%s: %s %q reached the sandbox", tc.name, name, v)
			}
		}
		if c := got.Get("Cookie"); strings.Contains(c, "hutch_") {
			t.Errorf("%s: cookies reaching the sandbox: %q", tc.name, c)
		}
		if set := h.Values("Set-Cookie"); len(set) != 1 || !strings.HasPrefix(set[0], "app=") {
			t.Errorf("%s: cookies the app set reaching the browser: %q", tc.name, set)
		}
	}
}

// A path-routed preview shares the console's origin: its pages are
// sandboxed in an opaque origin (CSP sandbox without allow-same-origin,
// beside the app's own policy), Service-Worker-Allowed never leaves it,
// and a service worker's script is refused as JSON (finding 4). A
// host-routed preview, its own origin, keeps its headers.
func TestAttackPreviewServiceWorker(t *testing.T) {
	t.Parallel()
	s, links := previewServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Service-Worker-Allowed", "/")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = io.WriteString(w, "self.addEventListener('fetch', () => {})")
	}))
	a := s.keyIn(t, "app-a", "ws-a")
	id := previewSandbox(t, a.Client)
	pathURL := s.url + "/v1/sandboxes/" + id + "/ports/3000/sw.js"
	cookie := "hutch_preview=" + linkToken(t, links, id)

	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"with the key", map[string]string{"Authorization": "Bearer " + a.key}},
		{"with a link", map[string]string{"Cookie": cookie}},
	} {
		status, h, _ := do(t, http.MethodGet, pathURL, tc.headers)
		if status != http.StatusOK {
			t.Fatalf("%s: %d", tc.name, status)
		}
		if v := h.Get("Service-Worker-Allowed"); v != "" {
			t.Errorf("%s: Service-Worker-Allowed %q reached the browser", tc.name, v)
		}
		var sandboxed bool
		for _, p := range h.Values("Content-Security-Policy") {
			sandboxed = sandboxed || strings.HasPrefix(p, "sandbox")
			if strings.Contains(p, "allow-same-origin") {
				t.Errorf("%s: a sandbox of the same origin: %q", tc.name, p)
			}
		}
		if !sandboxed || len(h.Values("Content-Security-Policy")) != 2 {
			t.Errorf("%s: Content-Security-Policy %q, want the app's and a sandbox", tc.name, h.Values("Content-Security-Policy"))
		}

		sw := map[string]string{"Service-Worker": "script"}
		for k, v := range tc.headers {
			sw[k] = v
		}
		status, _, body := do(t, http.MethodGet, pathURL, sw)
		if status != http.StatusForbidden || !strings.Contains(body, `"permission_denied"`) {
			t.Errorf("%s: a service worker's script by path: %d %s, want 403 permission_denied", tc.name, status, body)
		}
	}

	status, h, _ := do(t, http.MethodGet, s.url+"/sw.js", map[string]string{"Host": "3000-" + id + ".localhost", "Authorization": "Bearer " + a.key, "Service-Worker": "script"})
	if status != http.StatusOK || h.Get("Service-Worker-Allowed") != "/" || len(h.Values("Content-Security-Policy")) != 1 {
		t.Errorf("by host: %d %v, want the app's answer as it is", status, h)
	}
}

// Every hutch_preview cookie a request carries is checked, not only the
// first: a cookie another page tossed in (a parent domain's, a wider
// path's, sent first) neither locks out a valid link nor lets anything
// through; a link for another port or sandbox does not either.
func TestAttackPreviewCookieTossing(t *testing.T) {
	t.Parallel()
	s, links := previewServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "app") }))
	a := s.keyIn(t, "app-a", "ws-a")
	id, other := previewSandbox(t, a.Client), previewSandbox(t, a.Client)
	tok, otherTok := linkToken(t, links, id), linkToken(t, links, other)
	pathURL := s.url + "/v1/sandboxes/" + id + "/ports/3000/"
	for _, tc := range []struct {
		name, cookie string
		want         int
	}{
		{"a tossed cookie before the link's", "hutch_preview=tossed; hutch_preview=" + tok, http.StatusOK},
		{"another sandbox's link before the link's", "hutch_preview=" + otherTok + "; hutch_preview=" + tok, http.StatusOK},
		{"the embed cookie after a tossed one", "hutch_preview=tossed; hutch_preview_embed=" + tok, http.StatusOK},
		{"tossed cookies only", "hutch_preview=tossed; hutch_preview=x", http.StatusUnauthorized},
		{"another sandbox's link only", "hutch_preview=" + otherTok + "; hutch_preview_embed=" + otherTok, http.StatusUnauthorized},
	} {
		status, _, body := do(t, http.MethodGet, pathURL, map[string]string{"Cookie": tc.cookie})
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
	}
}

// A link's cookie is Secure whenever the daemon is reached over HTTPS,
// also when a proxy in front of it terminates TLS (its public URL is
// https): else a network attacker reads it off a later plain request.
func TestAttackPreviewCookieSecure(t *testing.T) {
	t.Parallel()
	app := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "app") })
	for _, tc := range []struct {
		publicURL string
		secure    bool
	}{
		{"https://hutch.example.com", true},
		{"HTTPS://hutch.example.com:8443/", true},
		{"http://hutch.example.com", false},
	} {
		s, links := previewServer(t, app, func(c *Config) { c.PublicURL = tc.publicURL })
		id := previewSandbox(t, s.client)
		tok := linkToken(t, links, id)
		for _, u := range []struct{ url, host string }{
			{s.url + "/v1/sandboxes/" + id + "/ports/3000/?hutch_preview_token=" + tok, ""},
			{s.url + "/?hutch_preview_token=" + tok, "3000-" + id + ".example.com"},
		} {
			headers := map[string]string{}
			if u.host != "" {
				headers["Host"] = "3000-" + id + ".localhost"
			}
			status, h, _ := do(t, http.MethodGet, u.url, headers)
			if status != http.StatusSeeOther {
				t.Fatalf("%s %s: %d, want the link's redirect", tc.publicURL, u.url, status)
			}
			var found bool
			for _, line := range h.Values("Set-Cookie") {
				c, err := http.ParseSetCookie(line)
				if err != nil || c.Name != "hutch_preview" {
					continue
				}
				found = true
				if c.Secure != tc.secure {
					t.Errorf("public URL %s, %s: the link's cookie Secure=%v, want %v", tc.publicURL, u.url, c.Secure, tc.secure)
				}
			}
			if !found {
				t.Errorf("public URL %s, %s: no link cookie in %q", tc.publicURL, u.url, h.Values("Set-Cookie"))
			}
		}
	}
}
