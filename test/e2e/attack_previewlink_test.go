package e2e

import (
	"net/http"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// Finding 16 of issue 36 (preview links): a link was bound to a port, not
// to the service it was made for, so once that service was gone it opened
// whatever listened on the port next. A link opens its service only.
func TestAttackPreviewLinkOutlivesService(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Runtime: "runc"})
	serve := func(name, text string) {
		t.Helper()
		if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: name, Command: "mkdir -p " + name + " && cd " + name + " && echo " + text + " > index.html && exec python3 -m http.server 8000", Port: 8000}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, name, client.ServiceRunning)
	}
	get := func(u string) (int, string) { return browserGet(t, d.browser(), u) }

	serve("web", "the-web-service")
	link, err := d.client.ServiceLink(ctx, sb.ID, "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(link.URL); code != http.StatusOK || body != "the-web-service\n" {
		t.Fatalf("the link to web: %d %q", code, body)
	}
	if err := d.client.DeleteService(ctx, sb.ID, "web"); err != nil {
		t.Fatal(err)
	}
	serve("admin", "the-admin-service")
	for _, u := range []string{link.URL, link.PathURL} {
		if code, body := get(u); code != http.StatusUnauthorized {
			t.Errorf("web's link, with admin on its port: %d %q, want 401", code, body)
		}
	}
	fresh, err := d.client.ServiceLink(ctx, sb.ID, "admin", 0)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(fresh.URL); code != http.StatusOK || body != "the-admin-service\n" {
		t.Errorf("a link to admin: %d %q", code, body)
	}
}
