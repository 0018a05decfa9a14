package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/console"
)

// The console's page and files need no key; nothing else does without one,
// and a file the console does not have is a plain 404.
func TestConsoleNeedsNoKey(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	get := func(path string) *http.Response {
		t.Helper()
		res, err := http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = res.Body.Close() })
		return res
	}
	page := get("/")
	want := http.StatusOK
	if !console.Built() {
		want = http.StatusServiceUnavailable // says to run make build
	}
	if page.StatusCode != want || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/") {
		t.Errorf("GET / without a key: %s %q, want %d", page.Status, page.Header.Get("Content-Type"), want)
	}
	if res := get("/assets/nothing.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /assets/nothing.js: %s, want 404", res.Status)
	}
	for _, p := range []string{"/v1/sandboxes", "/index.html", "/elsewhere"} {
		if res := get(p); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a key: %s, want 401", p, res.Status)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST / without a key: %s, want 401", res.Status)
	}
}
