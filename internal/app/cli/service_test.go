package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// hutch service link makes a link, or with --revoke revokes the
// service's links and makes none.
func TestServiceLink(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string // the requests' methods and paths
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			writeJSON(w, http.StatusOK, client.ServiceLink{URL: "http://link", PathURL: "http://link", ExpiresAt: fakeNow})
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	run := func(args ...string) result { return runAt(t, srv.URL, args...) }
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantReq  string // "" for none
	}{
		{"link", []string{"service", "link", "abc", "web"}, 0, "http://link\n", "POST /v1/sandboxes/abc/services/web/link"},
		{"revoke", []string{"service", "link", "--revoke", "abc", "web"}, 0, "", "DELETE /v1/sandboxes/abc/services/web/link"},
		{"revoke with an expiry", []string{"service", "link", "--revoke", "--expires", "2h", "abc", "web"}, 2, "", ""},
	}
	for _, tt := range tests {
		mu.Lock()
		got = nil
		mu.Unlock()
		r := run(tt.args...)
		if r.code != tt.wantCode || r.stdout != tt.wantOut {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q", tt.name, r.code, r.stdout, r.stderr, tt.wantCode, tt.wantOut)
		}
		mu.Lock()
		if strings.Join(got, ",") != tt.wantReq {
			t.Errorf("%s: requests %q, want %q", tt.name, got, tt.wantReq)
		}
		mu.Unlock()
	}
}
