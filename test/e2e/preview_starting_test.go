package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// startingServiceCmd serves index.html on port after two seconds, as a dev
// server takes a while to listen.
func startingServiceCmd(name, port string) string {
	return "mkdir -p " + name + " && cd " + name + " && echo " + name + "-page > index.html && sleep 2 && exec python3 -m http.server " + port
}

// Issue 37, bug 2: a preview request sent right after a service's
// restart, or its start, answered 502 while the service started. It
// waits for the port instead, as after a wake: after Restart Service on a
// suspended sandbox, after a plain start, and a browser's page load gets
// the waking page meanwhile, then the app's.
func TestPreviewWaitsForStartingService(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		web, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: startingServiceCmd("web", "8000"), Port: 8000})
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		suspendIdle(t, d, sb.ID)
		if _, err := d.client.RestartService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		if status, _, body := previewGet(t, d, web.PathURL, ""); status != http.StatusOK || body != "web-page\n" {
			t.Errorf("right after Restart Service on the suspended sandbox: %d %q, want 200 with the page", status, body)
		}

		api, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "api", Command: startingServiceCmd("api", "8001"), Port: 8001})
		if err != nil {
			t.Fatal(err)
		}
		if status, _, body := previewGet(t, d, api.PathURL, ""); status != http.StatusOK || body != "api-page\n" {
			t.Errorf("right after the service's start: %d %q, want 200 with the page", status, body)
		}

		if _, err := d.client.RestartService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		testPageLoadWhileStarting(t, d, web.PathURL, "web-page\n")
	})
}

// testPageLoadWhileStarting loads url as a browser does while its service
// starts: the waking page, which reloads itself, until the app's page.
func testPageLoadWhileStarting(t *testing.T, d *daemon, url, want string) {
	t.Helper()
	status, h, body := previewGet(t, d, url, "text/html")
	if status != http.StatusOK || h.Get("Hutch-Preview") != "waking" || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("a page load right after Restart Service: %d %v %q, want the waking page", status, h, body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		status, h, body = previewGet(t, d, url, "text/html")
		if status == http.StatusOK && h.Get("Hutch-Preview") == "" && body == want {
			return
		}
		if status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("the page's reloads while its service starts: %d %v %q, want the waking page, then %q", status, h, body, want)
		}
	}
}

// previewGet GETs a preview with d's key, accepting accept (any when
// ""), and returns the answer.
func previewGet(t *testing.T, d *daemon, url, accept string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// Through E2B's sandbox front (getHost's way in) too: a request sent right
// after a service's restart waits for its port rather than answering 502.
func TestE2BFrontWaitsForStartingService(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	made := e2bCreate(t, d.addr, d.key)
	t.Cleanup(func() { _ = d.client.DeleteSandbox(context.WithoutCancel(ctx), made.SandboxID) })
	if _, err := d.client.StartService(ctx, made.SandboxID, client.StartServiceRequest{Name: "web", Command: startingServiceCmd("web", "8000"), Port: 8000}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, made.SandboxID, "web", client.ServiceRunning)
	if _, err := d.client.RestartService(ctx, made.SandboxID, "web"); err != nil {
		t.Fatal(err)
	}
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.e2bAddr+"/", nil)
	get.Header.Set("E2b-Sandbox-Id", made.SandboxID)
	get.Header.Set("E2b-Sandbox-Port", "8000")
	resp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "web-page\n" {
		t.Errorf("through the E2B front right after the restart: %d %q, want 200 with the page", resp.StatusCode, body)
	}
}

// e2bSandbox is what E2B's create answers that the tests use.
type e2bSandbox struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

// e2bCreate creates a sandbox of the host template through E2B's control
// plane of the daemon at addr, with key.
func e2bCreate(t *testing.T, addr, key string) e2bSandbox {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/e2b/sandboxes", strings.NewReader(`{"templateID":"host"}`))
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var made e2bSandbox
	err = json.NewDecoder(resp.Body).Decode(&made)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || made.SandboxID == "" {
		t.Fatalf("E2B create at %s: %d %+v %v", addr, resp.StatusCode, made, err)
	}
	return made
}
