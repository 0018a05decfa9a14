package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A service is starting until its port accepts, then running, as its
// events show; a reload picks up edited code; one that crashes is an
// error with its exit code and log tail; stopped, it stays stopped;
// suspended with its sandbox, it runs again after the resume; a new
// service in the preview slot replaces the one before. Under both
// runtimes.
func TestServices(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		// A server that says which version of its code it runs, and
		// starts listening after a second.
		if res := d.exec(sb.ID, `cat > app.py <<'EOF'
import http.server, time
time.sleep(1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"v1\n")
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
EOF`); res.ExitCode != 0 {
			t.Fatalf("write the app: %+v", res)
		}
		get := func() string {
			t.Helper()
			return d.exec(sb.ID, "curl -sf http://127.0.0.1:8000/").Stdout
		}

		// Its events: starting, then running once the port accepts.
		seen := make(chan string, 16)
		evCtx, stopEvents := context.WithCancel(ctx)
		defer stopEvents()
		svc, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Cmd: []string{"python3", "app.py"}, Port: 8000, Slot: "preview"})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Status != client.ServiceStarting || svc.Port != 8000 || svc.Slot != "preview" {
			t.Errorf("a service just started: %+v", svc)
		}
		go func() {
			_ = d.client.ServiceEvents(evCtx, sb.ID, "web", func(s client.Service) error {
				seen <- s.Status
				return nil
			})
		}()
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		var statuses []string
		for len(statuses) == 0 || statuses[len(statuses)-1] != client.ServiceRunning {
			select {
			case s := <-seen:
				statuses = append(statuses, s)
			case <-time.After(10 * time.Second):
				t.Fatalf("events: %v, and no running", statuses)
			}
		}
		if statuses[0] != client.ServiceStarting && statuses[0] != client.ServiceRunning {
			t.Errorf("events: %v", statuses)
		}
		stopEvents()
		if got := get(); got != "v1\n" {
			t.Errorf("the app answers %q", got)
		}

		// A reload picks up edited code.
		d.exec(sb.ID, "sed -i s/v1/v2/ app.py")
		if got := get(); got != "v1\n" {
			t.Errorf("before the reload the app answers %q", got)
		}
		if _, err := d.client.RestartService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		if got := get(); got != "v2\n" {
			t.Errorf("after the reload the app answers %q", got)
		}

		// Stopped, it stays so; suspended with its sandbox, it runs again
		// after a call wakes it.
		if svc, err := d.client.StopService(ctx, sb.ID, "web"); err != nil || svc.Status != client.ServiceStopped {
			t.Fatalf("stop: %+v, %v", svc, err)
		}
		if _, err := d.client.RestartService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if svc, err := d.client.GetService(ctx, sb.ID, "web"); err != nil || svc.Status != client.ServiceSuspended {
			t.Errorf("with its sandbox suspended: %+v, %v", svc, err)
		}
		d.exec(sb.ID, "true")
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)

		// A crash: error, with how it ended, also when a child it left
		// holds its output open for a moment after it exits.
		crash, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "crash", Command: "echo starting up; echo bad config >&2; sleep 1 & exit 3", Port: 9000})
		if err != nil {
			t.Fatal(err)
		}
		failed := waitStatus(t, d, sb.ID, crash.Name, client.ServiceError)
		if failed.ExitCode == nil || *failed.ExitCode != 3 || !strings.Contains(failed.LogTail, "bad config") {
			t.Errorf("a crashed service: %+v", failed)
		}

		// A new service in the preview slot replaces the one before; one
		// outside it is kept.
		if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web2", Command: "python3 -m http.server 8001", Port: 8001, Slot: "preview"}); err != nil {
			t.Fatal(err)
		}
		all, err := d.client.ListServices(ctx, sb.ID)
		var names []string
		for _, s := range all {
			names = append(names, s.Name)
		}
		if err != nil || strings.Join(names, ",") != "crash,web2" {
			t.Errorf("services after a replace: %v, %v", names, err)
		}
		if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Command: "true", Port: 0}); !client.IsInvalidArgument(err) {
			t.Errorf("a service without a port: %v", err)
		}
		if err := d.client.DeleteService(ctx, sb.ID, "web2"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.GetService(ctx, sb.ID, "web2"); !client.IsNotFound(err) {
			t.Errorf("a deleted service: %v", err)
		}
	})
}

// waitStatus waits up to 30 s for a service's status and returns it.
func waitStatus(t *testing.T, d *daemon, id, name, status string) client.Service {
	t.Helper()
	var last *client.Service
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		svc, err := d.client.GetService(t.Context(), id, name)
		if err != nil {
			t.Fatal(err)
		}
		if last = svc; svc.Status == status {
			return *svc
		}
	}
	t.Fatalf("service %s is %+v, not %s, after 30 s", name, last, status)
	return client.Service{}
}

// A preview link opens its service's preview without the key: its first
// visit sets a cookie (by host, also one for pages that frame it) and
// redirects to the clean URL, which then answers;
// it opens no other sandbox's, and not after it expires. A public
// service answers anyone. Runtime-independent: under runc.
func TestPreviewLinks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	var ids []string
	for range 2 {
		sb := d.create(client.CreateSandboxRequest{Runtime: "runc"})
		ids = append(ids, sb.ID)
		if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: "echo hi-from-" + sb.ID + " > index.html && exec python3 -m http.server 8000", Port: 8000}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
	}
	browser := d.browser
	get := func(c *http.Client, u string) (int, string) { return browserGet(t, c, u) }
	svc, err := d.client.GetService(ctx, ids[0], "web")
	if err != nil || svc.PreviewURL == "" || svc.PathURL == "" {
		t.Fatalf("the service's URLs: %+v, %v", svc, err)
	}
	if code, _ := get(browser(), svc.PreviewURL); code != http.StatusUnauthorized {
		t.Errorf("a private preview without key or link: %d", code)
	}
	link, err := d.client.ServiceLink(ctx, ids[0], "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	b := browser()
	if code, body := get(b, link.URL); code != http.StatusOK || body != "hi-from-"+ids[0]+"\n" {
		t.Errorf("the link: %d %q", code, body)
	}
	if code, _ := get(b, svc.PreviewURL); code != http.StatusOK {
		t.Errorf("the clean URL after the link's visit: %d", code)
	}
	if code, body := get(browser(), link.PathURL); code != http.StatusOK || body != "hi-from-"+ids[0]+"\n" {
		t.Errorf("the link by path: %d %q", code, body)
	}
	// By host, its first visit also sets the cookie a page that frames the
	// preview needs (SameSite=None, Secure, Partitioned), which alone
	// opens the preview; by path (the daemon's own origin) it does not.
	first := browser()
	first.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	embed := func(u string) *http.Cookie {
		t.Helper()
		resp, err := first.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "hutch_preview_embed" {
				return c
			}
		}
		return nil
	}
	c := embed(link.URL)
	if c == nil || c.SameSite != http.SameSiteNoneMode || !c.Secure || !c.Partitioned || !c.HttpOnly {
		t.Errorf("the embedding cookie of a link by host: %+v", c)
	} else {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.PreviewURL, nil)
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		resp, err := browser().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the preview with the embedding cookie alone: %d", resp.StatusCode)
		}
	}
	if c := embed(link.PathURL); c != nil {
		t.Errorf("a link by path set the embedding cookie: %+v", c)
	}
	// The link's token on the other sandbox's preview opens nothing.
	other := strings.Replace(link.URL, ids[0], ids[1], 1)
	if code, _ := get(browser(), other); code != http.StatusUnauthorized {
		t.Errorf("a link of one sandbox on another's preview: %d", code)
	}
	short, err := d.client.ServiceLink(ctx, ids[0], "web", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if code, body := get(browser(), short.URL); code != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Errorf("an expired link: %d %q", code, body)
	}
	// A public service answers anyone.
	if _, err := d.client.StartService(ctx, ids[1], client.StartServiceRequest{Name: "open", Command: "echo open > index.html && exec python3 -m http.server 8001", Port: 8001, Public: true}); err != nil {
		t.Fatal(err)
	}
	open := waitStatus(t, d, ids[1], "open", client.ServiceRunning)
	if code, body := get(browser(), open.PreviewURL); code != http.StatusOK || body != "open\n" {
		t.Errorf("a public service: %d %q", code, body)
	}
}

// A sandbox that its idle timer suspended, its service running, is woken
// by a request to the service's preview, which is answered with the
// service's page: the service started again with the same command.
func TestServiceWakesOnPreview(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, IdleTimeoutS: 2})
		cmd := "echo woken-up > index.html && exec python3 -m http.server 8000"
		if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: cmd, Port: 8000}); err != nil {
			t.Fatal(err)
		}
		before := waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			s, err := d.client.GetSandbox(ctx, sb.ID)
			if err == nil && s.State == client.StateSuspended && strings.Contains(s.StateReason, "idle") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not suspended by its idle timer with only a service running: %+v, %v", s, err)
			}
		}
		if svc, err := d.client.GetService(ctx, sb.ID, "web"); err != nil || svc.Status != client.ServiceSuspended {
			t.Errorf("the service of an idle-suspended sandbox: %+v, %v", svc, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, before.PathURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "woken-up\n" {
			t.Errorf("a preview request to the idle-suspended sandbox: %d %q", resp.StatusCode, body)
		}
		// Under runc the suspend ended it: the page above is its new run's.
		after := waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		if strings.Join(after.Cmd, " ") != strings.Join(before.Cmd, " ") || !after.Since.After(before.Since) {
			t.Errorf("the service after the wake: %+v, before %+v", after, before)
		}
	})
}
