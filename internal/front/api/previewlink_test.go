package api

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/download"
)

// Revoking a service's links: every link made for it until then, by its
// token or its cookies, one made before links had an issue time, and one
// made before links named their service (for its port), opens nothing;
// one made after opens; a service that does not exist is 404.
func TestServiceLinksRevoked(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
	s, links := previewServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "app") }))
	ctx := t.Context()
	id := previewSandbox(t, s.client)
	if _, err := s.client.StartService(ctx, id, client.StartServiceRequest{Name: "web", Cmd: []string{"sleep", "300"}, Cwd: s.be.Root(id), Port: 3000}); err != nil {
		t.Fatal(err)
	}
	pathURL := s.url + "/v1/sandboxes/" + id + "/ports/3000/"
	link := func() string {
		t.Helper()
		l, err := s.client.ServiceLink(ctx, id, "web", 0)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(l.PathURL)
		if err != nil {
			t.Fatal(err)
		}
		return u.Query().Get(previewTokenParam)
	}
	// opens checks each way a browser may carry tok: in the URL (whose
	// answer, when it opens, is a redirect that sets the cookies), in
	// either cookie.
	opens := func(what, tok string, open bool) {
		t.Helper()
		wantURL, want := http.StatusUnauthorized, http.StatusUnauthorized
		if open {
			wantURL, want = http.StatusSeeOther, http.StatusOK
		}
		if status, _, body := do(t, http.MethodGet, pathURL+"?"+previewTokenParam+"="+url.QueryEscape(tok), nil); status != wantURL {
			t.Errorf("%s, in the URL: %d %s, want %d", what, status, body, wantURL)
		}
		for _, cookie := range []string{previewCookie, embedCookie} {
			status, _, body := do(t, http.MethodGet, pathURL, map[string]string{"Cookie": cookie + "=" + tok})
			if status != want || open && body != "app" || !open && !strings.Contains(body, `"unauthenticated"`) {
				t.Errorf("%s, in cookie %s: %d %s, want %d", what, cookie, status, body, want)
			}
		}
	}

	before := link()
	unissued, err := links.Sign(download.Claim{Sandbox: id, Path: "/", Port: 3000, Service: "web", Expires: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	portOnly := linkToken(t, links, id) // made before links named their service
	opens("a link", before, true)
	opens("a link without an issue time", unissued, true)
	opens("a link of the service's port", portOnly, true)

	if err := s.client.RevokeServiceLinks(ctx, id, "web"); err != nil {
		t.Fatal(err)
	}
	opens("a link made before the revocation", before, false)
	opens("a link without an issue time, after a revocation", unissued, false)
	opens("a link of the service's port, after a revocation", portOnly, false)
	opens("a link made after the revocation", link(), true)

	if err := s.client.RevokeServiceLinks(ctx, id, "nope"); !client.IsNotFound(err) {
		t.Errorf("revoke the links of a service that does not exist: %v, want not found", err)
	}
}
