package api

import (
	"net/http"
	"strings"
	"testing"
)

// Finding 3 of issue 36 (and the class around it): a handler's check made
// on one spelling of a path and a route taken on another. Every route of
// the API, walked from its table, is refused in every other spelling
// before any handler (or the preview and download exemptions of
// identify) sees it; the plain spelling still reaches its handler.
func TestAttackPathSpellings(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spell := map[string]func(p string) string{
		"a doubled first slash": func(p string) string { return "/" + p },
		"a doubled inner slash": func(p string) string { return strings.Replace(p, "/", "//", 2) },
		"a dot segment":         func(p string) string { return inFirst(p, "/./") },
		"a dot-dot segment":     func(p string) string { return inFirst(p, "/x/../") },
		"a trailing dot":        func(p string) string { return p + "/." },
	}
	for _, rt := range (&Server{}).routes() {
		method, p, _ := strings.Cut(rt.pattern, " ")
		p = strings.NewReplacer("{id}", "sbx", "{name}", "n", "{token}", "tok", "{w}", "ws", "{context}", "c").Replace(p)
		for how, f := range spell {
			for _, key := range []string{"", testKey} {
				status, body, _ := call(t, method, s.url+f(p), key, nil, nil)
				if status != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
					t.Errorf("%s %s (%s, key %t): %d %s, want 400", method, f(p), how, key != "", status, body)
				}
			}
		}
	}
	for _, p := range []string{"//v1/sandboxes/x/ports/3000/", "/v1/sandboxes/x/ports/3000/../../../keys", "//mcp", "/v1/downloads/../keys", "/e2b//sandboxes"} {
		if status, body, _ := call(t, http.MethodGet, s.url+p, "", nil, nil); status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", p, status, body)
		}
	}
	if status, body, _ := call(t, http.MethodGet, s.url+"/v1/health", testKey, nil, nil); status != http.StatusOK {
		t.Errorf("GET /v1/health in its plain spelling: %d %s", status, body)
	}
}

// inFirst is path p with seg in place of the slash after its first
// segment (/v1/./sandboxes), or of its first slash when it has one
// segment only (/./metrics).
func inFirst(p, seg string) string {
	if i := strings.Index(p[1:], "/"); i >= 0 {
		return p[:i+1] + seg + p[i+2:]
	}
	return seg + p[1:]
}

func TestCanonicalPath(t *testing.T) {
	t.Parallel()
	for p, ok := range map[string]bool{
		"/": true, "": true, "*": true, "/v1/sandboxes": true, "/v1/sandboxes/": true, "/a/b.c/..d/": true,
		"//": false, "/a//b": false, "/./a": false, "/a/..": false, "/a/../b": false, "a/b": false, "/a/./": false,
	} {
		if err := canonicalPath(p); (err == nil) != ok {
			t.Errorf("canonicalPath(%q): %v, want ok %t", p, err, ok)
		}
	}
}
