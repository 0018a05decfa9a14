package preview

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Attacks on the preview proxy (docs/security.md, "preview page →
// console and API"): what a sandbox's server, or a page it serves, could
// do with what crosses the proxy.

// anonymousFront serves the proxy as the API does for a caller without a
// key of Hutch's (a preview link's cookie, a public service): path
// routing at /sb/{id}/{port}/…, host routing for any other path, the
// Authorization header not taken for Hutch's.
func anonymousFront(t *testing.T, p *Proxy) *httptest.Server {
	t.Helper()
	serve := func(w http.ResponseWriter, r *http.Request, target Target) {
		if err := p.Serve(w, r, target); err != nil {
			status := http.StatusBadGateway
			if errdefs.Kind(err) == errdefs.ErrPermissionDenied {
				status = http.StatusForbidden
			}
			http.Error(w, errdefs.Kind(err).Error()+": "+err.Error(), status)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/sb/{id}/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		port, _ := strconv.Atoi(r.PathValue("port"))
		serve(w, r, Target{Sandbox: r.PathValue("id"), Port: port, Prefix: "/sb/" + r.PathValue("id") + "/" + r.PathValue("port")})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, Target{Sandbox: "sb1", Port: 3000}) // host routing: 3000-sb1.<domain>
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func anonymousSetup(t *testing.T) (*fakeCore, *httptest.Server, *http.Client) {
	t.Helper()
	core := &fakeCore{sb: newFakeSandbox(t)}
	srv := anonymousFront(t, New(Config{Acquire: core.acquire, WakePage: 50 * time.Millisecond, ListenWait: 5 * time.Second}))
	c := srv.Client()
	t.Cleanup(c.CloseIdleConnections)
	return core, srv, c
}

// A path-routed preview shares its origin with the console and the API:
// its answers are sandboxed in an opaque origin (CSP sandbox, never
// allow-same-origin, added to the app's own policy), carry no
// Service-Worker-Allowed, and a service worker's script is refused. A
// host-routed preview, an origin of its own, is answered as its server
// answers.
func TestAttackPreviewServiceWorker(t *testing.T) {
	core, srv, c := anonymousSetup(t)
	core.sb.listen(t, 3000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Service-Worker-Allowed", "/")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		if strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = io.WriteString(w, "self.addEventListener('fetch', (e) => fetch('/steal', {method: 'POST', body: e.request.headers.get('Authorization')}))")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<script>navigator.serviceWorker.register("sw.js", {scope: "/"})</script>`)
	}))

	for _, path := range []string{"/sb/sb1/3000/", "/sb/sb1/3000/sw.js", "/sb/sb1/3000/deep/page.html"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		status, h, _ := get(t, c, req)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, status)
		}
		if v := h.Values("Service-Worker-Allowed"); len(v) != 0 {
			t.Errorf("GET %s: Service-Worker-Allowed %q reached the browser", path, v)
		}
		policies := h.Values("Content-Security-Policy")
		if !slices.Contains(policies, "default-src 'self'") {
			t.Errorf("GET %s: the app's own policy was dropped: %q", path, policies)
		}
		if !slices.ContainsFunc(policies, func(p string) bool { return strings.HasPrefix(p, "sandbox ") || p == "sandbox" }) {
			t.Errorf("GET %s: no CSP sandbox: %q", path, policies)
		}
		for _, p := range policies {
			if strings.Contains(p, "allow-same-origin") {
				t.Errorf("GET %s: the sandbox allows the same origin: %q", path, p)
			}
		}
	}

	// A browser fetching a worker's script says so: refused, whatever the
	// spelling of the header's value.
	for _, v := range []string{"script", "Script", "x"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sb/sb1/3000/sw.js", nil)
		req.Header.Set("Service-Worker", v)
		if status, _, body := get(t, c, req); status != http.StatusForbidden || !strings.HasPrefix(body, "permission_denied") {
			t.Errorf("a service worker's script (Service-Worker: %s) by path: %d %q, want 403 permission_denied", v, status, body)
		}
	}

	// Host routing: the preview's own origin, its answer as it is.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sw.js", nil)
	req.Header.Set("Service-Worker", "script")
	status, h, _ := get(t, c, req)
	if status != http.StatusOK || h.Get("Service-Worker-Allowed") != "/" || len(h.Values("Content-Security-Policy")) != 1 {
		t.Errorf("a host-routed preview's worker script: %d %v, want its answer as it is", status, h)
	}
	waitHolds(t, core, 0)
}

// Hutch's credentials never cross the proxy, even when the caller was let
// through without its key being taken for one (a preview link, a public
// service): a key of Hutch's shape in Authorization or X-Api-Key, a key
// offered as a WebSocket subprotocol, Hutch's cookies and headers; and a
// cookie of Hutch's names set by the app never reaches the browser. The
// app's own credentials pass.
func TestAttackPreviewCredentialsNotForwarded(t *testing.T) {
	core, srv, c := anonymousSetup(t)
	seen := make(chan http.Header, 4)
	core.sb.listen(t, 3000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		if r.Header.Get("Upgrade") != "" {
			var protocols []string
			if p := r.Header.Get("Sec-WebSocket-Protocol"); p == "chat" {
				protocols = []string{"chat"}
			}
			ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protocols, InsecureSkipVerify: true})
			if err == nil {
				_ = ws.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		for _, name := range []string{"hutch_preview", "HUTCH_preview_embed", "Hutch_x", "app"} {
			http.SetCookie(w, &http.Cookie{Name: name, Value: "v", Path: "/"})
		}
	}))

	const key = "hutch_0123456789abcdef0123456789abcdef"
	for _, base := range []string{srv.URL + "/sb/sb1/3000/", srv.URL + "/"} {
		for _, tc := range []struct {
			name    string
			headers map[string]string
			gone    []string          // headers the app must not get
			kept    map[string]string // and those it must
		}{
			{name: "a Hutch key as a bearer token", headers: map[string]string{"Authorization": "Bearer " + key}, gone: []string{"Authorization"}},
			{name: "a Hutch key in any case", headers: map[string]string{"Authorization": "bearer HUTCH_abc"}, gone: []string{"Authorization"}},
			{name: "an E2B key", headers: map[string]string{"Authorization": "Bearer e2b_0123"}, gone: []string{"Authorization"}},
			{name: "a Hutch key as X-Api-Key", headers: map[string]string{"X-Api-Key": key}, gone: []string{"X-Api-Key"}},
			{name: "Hutch's headers", headers: map[string]string{"Hutch-User": "alice", "HUTCH-WORKSPACE": "w"}, gone: []string{"Hutch-User", "Hutch-Workspace"}},
			{name: "Hutch's cookies", headers: map[string]string{"Cookie": "hutch_preview=tok; HUTCH_PREVIEW=tok2; hutch_preview_embed=tok3"}, gone: []string{"Cookie"}},
			{name: "the app's own token", headers: map[string]string{"Authorization": "Bearer app-token", "X-Api-Key": "app-key", "Cookie": "hutch_preview=tok; sid=1"},
				kept: map[string]string{"Authorization": "Bearer app-token", "X-Api-Key": "app-key", "Cookie": "sid=1"}},
		} {
			req, _ := http.NewRequest(http.MethodGet, base, nil)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			status, h, _ := get(t, c, req)
			got := <-seen
			if status != http.StatusOK {
				t.Errorf("%s %s: %d", base, tc.name, status)
			}
			for _, name := range tc.gone {
				if v := got.Values(name); len(v) != 0 {
					t.Errorf("%s %s: %s %q reached the sandbox", base, tc.name, name, v)
				}
			}
			for name, want := range tc.kept {
				if v := got.Get(name); v != want {
					t.Errorf("%s %s: %s = %q in the sandbox, want %q", base, tc.name, name, v, want)
				}
			}
			if set := h.Values("Set-Cookie"); len(set) != 1 || !strings.HasPrefix(set[0], "app=") {
				t.Errorf("%s %s: cookies the app set that reach the browser: %q, want app's only", base, tc.name, set)
			}
		}
	}

	// A browser's WebSocket offers the key as a subprotocol beside
	// hutch.v1: neither reaches the app, whose own subprotocol does; when
	// the app picks none, hutch.v1 is picked for it (a browser drops an
	// upgrade that picks none of those it offered).
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	for _, tc := range []struct {
		name, url string
		offered   []string
		wantApp   string // Sec-WebSocket-Protocol the app gets
		wantPick  string
	}{
		{"the key and an app's subprotocol, by path", ws + "/sb/sb1/3000/ws", []string{"hutch.v1", "hutch.bearer." + key, "chat"}, "chat", "chat"},
		{"the key alone, by path", ws + "/sb/sb1/3000/ws", []string{"hutch.v1", "HUTCH.BEARER." + key}, "", "hutch.v1"},
		{"the key alone, by host", ws + "/ws", []string{"hutch.v1", "hutch.bearer." + key}, "", "hutch.v1"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		conn, _, err := websocket.Dial(ctx, tc.url, &websocket.DialOptions{Subprotocols: tc.offered})
		if err != nil {
			cancel()
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := <-seen
		if v := got.Values("Sec-WebSocket-Protocol"); strings.Join(v, ",") != tc.wantApp {
			t.Errorf("%s: the app was offered %q, want %q", tc.name, v, tc.wantApp)
		}
		if conn.Subprotocol() != tc.wantPick {
			t.Errorf("%s: picked %q, want %q", tc.name, conn.Subprotocol(), tc.wantPick)
		}
		_ = conn.CloseNow()
		cancel()
	}
	waitHolds(t, core, 0)
}
