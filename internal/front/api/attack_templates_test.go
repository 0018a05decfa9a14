package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Attacks on the tenant key → host boundary through POST /v1/templates
// (docs/security.md): what a workspace's key names for a build (a suite,
// a mirror, an image's registry) is fetched by the daemon, as root, from
// the daemon's networks. Each test here failed before its fix.

// inward serves on loopback, as a service of the host's own would, and
// counts what reaches it.
func inward(t *testing.T) (url string, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "a host service's answer", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}

// A workspace's key chose the suite and the mirror of a Debian build: a
// suite without a keyring on the host was built unchecked from a mirror on
// loopback, whose packages' scripts ran as host root. Now a workspace
// builds the host's release from the host's mirror, and is told so.
func TestAttackBuildPrivateMirror(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ws := s.keyIn(t, "builder", "ws-build")
	mirror, hits := inward(t)
	for _, body := range []map[string]any{
		{"name": "kali", "suite": "kali-rolling", "mirror": mirror + "/kali"},
		{"name": "mirror", "mirror": mirror + "/debian"},
		{"name": "suite", "suite": "kali-rolling"},
	} {
		b, _ := json.Marshal(body)
		status, answer := ws.raw(t, "POST", "/v1/templates", string(b))
		if status != http.StatusForbidden || !strings.Contains(answer, `"code":"permission_denied"`) || !strings.Contains(answer, "api.key") {
			t.Errorf("build %s with a workspace's key: %d %s, want 403 saying who may", b, status, answer)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the mirror on loopback was asked %d times", n)
	}
}

// A workspace's key pulled images from any registry the daemon could
// reach: services on loopback and the host's private networks (SSRF), whose
// answers came back in the error. Now its pulls reach public addresses
// only; the daemon's own key still pulls from a registry of the host's.
func TestAttackImagePullPrivate(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ws := s.keyIn(t, "puller", "ws-pull")
	registry, hits := inward(t)
	host := strings.TrimPrefix(registry, "http://")
	for _, ref := range []string{host + "/app:1", "localhost:" + host[strings.LastIndex(host, ":")+1:] + "/app:1", "169.254.169.254/latest:1"} {
		status, answer := ws.raw(t, "POST", "/v1/templates", `{"name":"pulled","image":"`+ref+`"}`)
		if status != http.StatusForbidden || !strings.Contains(answer, `"code":"permission_denied"`) {
			t.Errorf("pull %s with a workspace's key: %d %s, want 403", ref, status, answer)
		}
		if strings.Contains(answer, "a host service's answer") {
			t.Errorf("pull %s: the answer carries the service's: %s", ref, answer)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the registry on loopback was asked %d times by a workspace's pulls", n)
	}
	status, answer := s.admin().raw(t, "POST", "/v1/templates", `{"name":"pulled","image":"`+host+`/app:1"}`)
	if status == http.StatusForbidden || hits.Load() == 0 || strings.Contains(answer, "a host service's answer") {
		t.Errorf("pull from loopback with the daemon's key: %d %s after %d requests, want it tried, and the answer's body kept out", status, answer, hits.Load())
	}
}
