package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// TestBrowser builds the browser template as a user would, and under each
// runtime drives its Chromium with agent-browser in a sandbox, and takes
// screenshots of a service (screenshots).
func TestBrowser(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)
	if out, stderr, code := d.cli("", "template", "build", "browser"); code != 0 || !strings.HasPrefix(out, "browser ") {
		t.Fatalf("template build browser: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		t.Run("agent-browser", func(t *testing.T) { agentBrowser(t, d, runtime) })
		t.Run("screenshots", func(t *testing.T) { screenshots(t, d, runtime) })
	})
	t.Run("console", func(t *testing.T) { consoleRegionShot(t, d) })
}

// agentBrowser drives the browser template's Chromium with agent-browser
// as the sandbox user, with no flags: it opens a service of its own
// sandbox and prints the page's snapshot, text a script wrote included,
// then closes the browser.
func agentBrowser(t *testing.T, d *daemon, runtime string) {
	const page = `<!doctype html>
<html><head><title>Hutch burrow</title></head>
<body><h1>Welcome to the burrow</h1><button>Feed the rabbit</button>
<p id="js"></p><script>document.getElementById("js").textContent = "Carrots " + (40 + 2)</script>
</body></html>`
	sb := d.create(client.CreateSandboxRequest{Template: "browser", Runtime: runtime, Files: map[string]string{"index.html": page}})
	if _, err := d.client.StartService(t.Context(), sb.ID, client.StartServiceRequest{Name: "web", Command: "python3 -m http.server 3000", Port: 3000}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, sb.ID, "web", client.ServiceRunning)

	res := d.exec(sb.ID, "agent-browser open http://localhost:3000 && agent-browser snapshot")
	if res.ExitCode != 0 {
		t.Fatalf("agent-browser open && snapshot: %+v", res)
	}
	t.Logf("agent-browser open && snapshot:\n%s", res.Stdout)
	for _, want := range []string{"Hutch burrow", `heading "Welcome to the burrow"`, `button "Feed the rabbit"`, "Carrots 42"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("no %q in agent-browser's output:\n%s", want, res.Stdout)
		}
	}
	if res := d.exec(sb.ID, "agent-browser close"); res.ExitCode != 0 {
		t.Errorf("agent-browser close: %+v", res)
	}
}
