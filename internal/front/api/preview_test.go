package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/preview"
)

// fakePreviews routes hosts as the daemon's proxy does, and answers what
// it is passed with "proxied", noting it; err, when set, is its failure.
type fakePreviews struct {
	mu     sync.Mutex
	got    []preview.Target
	header http.Header
	err    error
}

func (f *fakePreviews) Route(host string) (preview.Target, bool) {
	return preview.ParseHost(host, preview.DefaultDomain)
}

func (f *fakePreviews) Domain() string { return preview.DefaultDomain }

func (f *fakePreviews) Serve(w http.ResponseWriter, r *http.Request, t preview.Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.got, f.header = append(f.got, t), r.Header.Clone()
	_, _ = io.WriteString(w, "proxied")
	return nil
}

func (f *fakePreviews) last() (preview.Target, http.Header, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		return preview.Target{}, nil, 0
	}
	return f.got[len(f.got)-1], f.header, len(f.got)
}

// sameRoute says whether a and b are the same place to go, the same way
// (Starting, a function, aside).
func sameRoute(a, b preview.Target) bool {
	return a.Sandbox == b.Sandbox && a.Port == b.Port && a.Prefix == b.Prefix &&
		a.StripAuthorization == b.StripAuthorization && a.WaitForWake == b.WaitForWake
}

// previewSandbox makes a sandbox with c, deleted when the test ends.
func previewSandbox(t *testing.T, c *client.Client) string {
	t.Helper()
	sb, err := c.CreateSandbox(t.Context(), client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.DeleteSandbox(context.Background(), sb.ID); err != nil {
			t.Error(err)
		}
	})
	return sb.ID
}

// previewCall makes a request with host (when not empty) and key (when
// not empty) and returns its status, error code (if JSON) and body.
func previewCall(t *testing.T, method, url, host, key string) (int, string, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e errorBody
	_ = json.Unmarshal(body, &e)
	return resp.StatusCode, e.Error.Code, string(body), resp.Header
}

// Path and host routing reach the preview with the sandbox, the port and
// the prefix to take off; only the sandbox's workspace's keys do (another
// workspace's finds no sandbox), and without a key it is 401. Neither is
// in the audit log. The API goes on answering beside host routing.
func TestPreviewRouting(t *testing.T) {
	t.Parallel()
	fp := &fakePreviews{}
	s := newTestServer(t, func(c *Config) { c.Previews = fp })
	a, b := s.keyIn(t, "app-a", "ws-a"), s.keyIn(t, "app-b", "ws-b")
	id := previewSandbox(t, a.Client)
	prefix := "/v1/sandboxes/" + id + "/ports/3000"
	tests := []struct {
		name, method, path, host, key string
		wantStatus                    int
		wantCode                      string
		want                          *preview.Target
	}{
		{"path routing", "GET", prefix + "/app/x?y=1", "", a.key, 200, "", &preview.Target{Sandbox: id, Port: 3000, Prefix: prefix, StripAuthorization: true}},
		{"path routing, any method", "PATCH", prefix + "/", "", a.key, 200, "", &preview.Target{Sandbox: id, Port: 3000, Prefix: prefix, StripAuthorization: true}},
		{"path routing, the administrator", "DELETE", "/v1/sandboxes/" + id + "/ports/8080/", "", testKey, 200, "", &preview.Target{Sandbox: id, Port: 8080, Prefix: "/v1/sandboxes/" + id + "/ports/8080", StripAuthorization: true}},
		{"host routing", "POST", "/v1/keys", "3000-" + id + ".localhost:7070", a.key, 200, "", &preview.Target{Sandbox: id, Port: 3000, StripAuthorization: true}},
		{"path routing, no key", "GET", prefix + "/", "", "", 401, "unauthenticated", nil},
		{"host routing, no key", "GET", "/", "3000-" + id + ".localhost", "", 401, "unauthenticated", nil},
		{"host routing, a wrong key", "GET", "/", "3000-" + id + ".localhost", "hutch_nope", 401, "unauthenticated", nil},
		{"another workspace's key", "GET", prefix + "/", "", b.key, 404, "not_found", nil},
		{"another workspace's key, by host", "GET", "/", "3000-" + id + ".localhost", b.key, 404, "not_found", nil},
		{"no such sandbox", "GET", "/v1/sandboxes/nosuchbox/ports/3000/", "", a.key, 404, "not_found", nil},
		{"a port that is no number", "GET", "/v1/sandboxes/" + id + "/ports/http/", "", a.key, 400, "invalid_argument", nil},
		{"port 0", "GET", "/v1/sandboxes/" + id + "/ports/0/", "", a.key, 400, "invalid_argument", nil},
		{"the API's own host", "GET", "/v1/sandboxes/" + id, "localhost:7070", a.key, 200, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, before := fp.last()
			status, code, body, h := previewCall(t, tt.method, s.url+tt.path, tt.host, tt.key)
			if status != tt.wantStatus || code != tt.wantCode {
				t.Fatalf("%d %s, want %d %s: %s", status, code, tt.wantStatus, tt.wantCode, body)
			}
			if status == 401 && h.Get("WWW-Authenticate") == "" {
				t.Error("a 401 without its challenge")
			}
			got, _, n := fp.last()
			switch {
			case tt.want == nil && n != before:
				t.Errorf("passed on to the preview: %+v", got)
			case tt.want != nil && (n == before || !sameRoute(got, *tt.want)):
				t.Errorf("passed on %+v (%d), want %+v", got, n-before, *tt.want)
			case tt.want != nil && got.Starting == nil:
				t.Error("passed on without Starting: a request while its service starts would not wait")
			}
		})
	}
	log, err := s.client.ListAudit(t.Context(), client.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		if strings.Contains(e.Action, "/ports/") || e.Action == "POST /v1/keys" && e.Key == "app-a" {
			t.Errorf("a preview request in the audit log: %+v", e)
		}
	}
}

// A preview whose server gives no answer is bad_gateway, as JSON.
func TestPreviewBadGateway(t *testing.T) {
	t.Parallel()
	fp := &fakePreviews{err: errdefs.BadGateway("sandbox x: nothing listens on port 3000 in the sandbox")}
	s := newTestServer(t, func(c *Config) { c.Previews = fp })
	id := previewSandbox(t, s.client)
	status, code, body, _ := previewCall(t, "GET", s.url+"/v1/sandboxes/"+id+"/ports/3000/", "", testKey)
	if status != http.StatusBadGateway || code != "bad_gateway" || !strings.Contains(body, "nothing listens on port 3000") {
		t.Errorf("%d %s %s", status, code, body)
	}
}

// PreviewAccess decides about requests without a key of the daemon's: it
// may let them through, with the app's own Authorization header kept, or
// refuse them.
func TestPreviewAccess(t *testing.T) {
	t.Parallel()
	fp := &fakePreviews{}
	var asked []preview.Target
	s := newTestServer(t, func(c *Config) {
		c.Previews = fp
		c.PreviewAccess = func(_ http.ResponseWriter, r *http.Request, t preview.Target) (bool, error) {
			asked = append(asked, t)
			if r.URL.Query().Get("link") != "signed" {
				return false, errdefs.Unauthenticated("this preview needs a key or a preview link")
			}
			return false, nil
		}
	})
	id := previewSandbox(t, s.client)
	host := "3000-" + id + ".localhost"
	status, _, body, _ := previewCall(t, "GET", s.url+"/?link=signed", host, "the-apps-own-token")
	if status != 200 || body != "proxied" {
		t.Fatalf("let through: %d %s", status, body)
	}
	got, h, _ := fp.last()
	if got.StripAuthorization || h.Get("Authorization") != "Bearer the-apps-own-token" {
		t.Errorf("the app's own Authorization header: %+v %q", got, h.Get("Authorization"))
	}
	status, code, _, hdr := previewCall(t, "GET", s.url+"/", host, "")
	if status != 401 || code != "unauthenticated" || hdr.Get("WWW-Authenticate") == "" {
		t.Errorf("refused: %d %s", status, code)
	}
	if len(asked) != 2 || !sameRoute(asked[0], preview.Target{Sandbox: id, Port: 3000}) {
		t.Errorf("PreviewAccess asked about %+v", asked)
	}
	// A key of the daemon's does not need it.
	if status, _, _, _ := previewCall(t, "GET", s.url+"/", host, testKey); status != 200 || len(asked) != 2 {
		t.Errorf("with the key: %d, PreviewAccess asked %d times", status, len(asked))
	}
}
