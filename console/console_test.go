package console

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// maxSize is what the console may add to the binary (issue 22).
const maxSize = 1 << 20

func requireBuilt(t *testing.T) {
	t.Helper()
	if !Built() {
		t.Skip("the console is not built: make build (it runs npm) builds it into console/dist/app")
	}
}

func get(t *testing.T, path, acceptEncoding string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if acceptEncoding != "" {
		r.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := httptest.NewRecorder()
	Handler("localhost").ServeHTTP(w, r)
	return w.Result()
}

func TestSize(t *testing.T) {
	requireBuilt(t)
	if n := Size(); n > maxSize {
		t.Errorf("the console adds %d bytes to the binary, more than its budget of %d", n, maxSize)
	}
}

// The page comes gzipped to a client that takes gzip, plain to one that
// does not, with its security headers; its files too, cached for good.
func TestServe(t *testing.T) {
	requireBuilt(t)
	res := get(t, "/", "gzip, deflate, br")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("GET / with gzip: %s, encoding %q", res.Status, res.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<title>Hutch</title>") {
		t.Errorf("the page: %.200s", page)
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"X-Frame-Options":        "DENY",
		"X-Content-Type-Options": "nosniff",
		"Vary":                   "Accept-Encoding",
		"Cache-Control":          "no-cache",
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
		!strings.Contains(csp, "frame-src *.localhost:*;") {
		t.Errorf("Content-Security-Policy: %q", csp)
	}

	plain := get(t, "/", "identity")
	body, _ := io.ReadAll(plain.Body)
	if plain.Header.Get("Content-Encoding") != "" || string(body) != string(page) {
		t.Errorf("GET / without gzip: encoding %q, %d bytes (want the page's %d)", plain.Header.Get("Content-Encoding"), len(body), len(page))
	}
	if got := get(t, "/", "gzip;q=0").Header.Get("Content-Encoding"); got != "" {
		t.Errorf("gzip;q=0 got encoding %q", got)
	}

	script := strings.SplitN(strings.SplitN(string(page), `src="`, 2)[1], `"`, 2)[0]
	asset := get(t, script, "gzip")
	if asset.StatusCode != http.StatusOK || !strings.Contains(asset.Header.Get("Content-Type"), "javascript") ||
		!strings.Contains(asset.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("GET %s: %s, %q, %q", script, asset.Status, asset.Header.Get("Content-Type"), asset.Header.Get("Cache-Control"))
	}
	for _, p := range []string{"/assets/nope.js", "/assets/../console.go", "/index.html"} {
		if res := get(t, p, "gzip"); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, res.Status)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"":                    false,
		"gzip":                true,
		"deflate, gzip;q=1.0": true,
		"br;q=1, gzip;q=0":    false,
		"gzip; q=0.5":         true,
		"*":                   true,
		"identity":            false,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", h, got, want)
		}
	}
}
