package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// A leaked preview link could only be stopped by deleting its service. A
// revocation (DELETE …/services/{name}/link) stops every link made for the
// service until then, by its URL (host or path) and by the cookie its
// first visit set, also after a daemon restart; a link made afterwards
// opens.
func TestAttackPreviewLinkRevoked(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Runtime: "runc"})
	if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: "echo the-web-service > index.html && exec python3 -m http.server 8000", Port: 8000}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
	browser := d.browser
	get := func(c *http.Client, u string) (int, string) { return browserGet(t, c, u) }
	// visit opens u in a new browser, checks it answers the service's
	// page, and returns the browser (with the cookie the visit set) and
	// the clean URL it was sent on to.
	visit := func(u string) (*http.Client, string) {
		t.Helper()
		b := browser()
		if code, body := get(b, u); code != http.StatusOK || body != "the-web-service\n" {
			t.Fatalf("%s: %d %q, want the service's page", u, code, body)
		}
		clean, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		clean.RawQuery = ""
		if len(b.Jar.Cookies(clean)) == 0 {
			t.Fatalf("%s: its first visit set no cookie for %s", u, clean)
		}
		return b, clean.String()
	}

	link, err := d.client.ServiceLink(ctx, sb.ID, "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	byHost, hostURL := visit(link.URL)
	byPath, pathURL := visit(link.PathURL)
	if link.URL == link.PathURL {
		t.Fatal("the daemon does not route previews by host: the link's host URL is its path URL")
	}

	if err := d.client.RevokeServiceLinks(ctx, sb.ID, "web"); err != nil {
		t.Fatal(err)
	}
	refused := func(when string) {
		t.Helper()
		for _, c := range []struct {
			what   string
			client *http.Client
			url    string
		}{
			{"the revoked link by host", browser(), link.URL},
			{"the revoked link by path", browser(), link.PathURL},
			{"the revoked link's cookie by host", byHost, hostURL},
			{"the revoked link's cookie by path", byPath, pathURL},
		} {
			if code, body := get(c.client, c.url); code != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
				t.Errorf("%s, %s: %d %q, want 401 saying it was revoked", when, c.what, code, body)
			}
		}
	}
	refused("after the revocation")

	fresh, err := d.client.ServiceLink(ctx, sb.ID, "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	freshBrowser, freshURL := visit(fresh.URL)
	visit(fresh.PathURL)

	// The revocation is the store's: a restarted daemon keeps it.
	d.kill()
	d.start()
	for _, c := range []*http.Client{byHost, byPath, freshBrowser} {
		c.CloseIdleConnections()
	}
	refused("after a daemon restart")
	if code, body := get(freshBrowser, freshURL); code != http.StatusOK || body != "the-web-service\n" {
		t.Errorf("after a daemon restart, the cookie of a link made after the revocation: %d %q", code, body)
	}
	if err := d.client.RevokeServiceLinks(ctx, sb.ID, "nope"); !client.IsNotFound(err) {
		t.Errorf("revoke the links of a service that does not exist: %v, want not found", err)
	}
}
