package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/rfb"
)

// TestDesktop builds the desktop template as a user would and, under each
// runtime, drives a desktop three ways: with E2B's Desktop SDK
// (@e2b/desktop, unmodified, test/e2b/desktop.mjs) through the front,
// whose TLS answers the SDK's https stream URL and its WebSocket; with
// Hutch's desktop API, whose click and typing into a page served in the
// sandbox change the page (its title, read by xdotool); and with the
// computer tools from the official MCP client.
func TestDesktop(t *testing.T) {
	t.Parallel()
	d, pool := desktopDaemon(t)
	scripts := e2bScripts(t)
	env, _ := e2bEnv(t, d)
	mcp := mcpDesktopClient(t)
	eachE2BRuntime(t, d, func(t *testing.T, runtime string) {
		t.Run("e2b", func(t *testing.T) { e2bDesktop(t, d, scripts, env, pool) })
		t.Run("api", func(t *testing.T) {
			id := desktopPage(t, d, runtime)
			desktopAPI(t, d, id)
			t.Run("mcp", func(t *testing.T) { mcpDesktop(t, d, mcp, id) })
		})
		t.Run("idle", func(t *testing.T) { idleDesktop(t, d, runtime) })
		if runtime == "runc" { // the console is the same whatever runs the sandbox
			t.Run("console", func(t *testing.T) { consoleDesktop(t, d) })
		}
	})
}

// desktopDaemon starts a daemon whose E2B front answers TLS with a
// certificate for *.localhost, and builds the desktop template on it; it
// returns the pool that trusts the certificate.
func desktopDaemon(t *testing.T) (*daemon, *x509.CertPool) {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	caPEM, cert := testCerts(t, "localhost", "*.localhost")
	certFile, keyFile := writeCert(t, cert)
	d := startDaemonWith(t, "--e2b-tls-cert", certFile, "--e2b-tls-key", keyFile)
	if out, stderr, code := d.cli("", "template", "build", "desktop"); code != 0 || !strings.HasPrefix(out, "desktop ") {
		t.Fatalf("template build desktop: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return d, pool
}

// writeCert writes cert and its key as PEM files of a temporary directory.
func writeCert(t *testing.T, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// e2bDesktop runs the Desktop SDK's script and checks what it saw; then
// the stream URL it made (https, through the front) serves noVNC's page
// and a WebSocket that speaks RFB.
func e2bDesktop(t *testing.T, d *daemon, scripts e2bRunner, env []string, pool *x509.CertPool) {
	f := scripts.run(t, env, "desktop.mjs")
	d.sandboxIDs = append(d.sandboxIDs, f.sandboxIDs...)
	f.want(t, "screenshot", map[string]any{"signature": "89504e470d0a1a0a", "width": 1024, "height": 768})
	f.want(t, "getScreenSize", map[string]any{"width": 1024, "height": 768})
	f.want(t, "moveMouse", map[string]any{"x": 100, "y": 150})
	f.want(t, "drag", map[string]any{"x": 600, "y": 500})
	f.want(t, "launch", map[string]any{"windows": 1})
	f.want(t, "write", map[string]any{"typed": "hello from the desktop", "screenChanged": true})
	if title, _ := f.facts["write"]["title"].(string); !strings.Contains(title, "Terminal") {
		t.Errorf("the focused window after typing is %q, not the terminal", title)
	}
	stream, _ := f.facts["stream"]["url"].(string)
	u, err := url.Parse(stream)
	if err != nil || u.Scheme != "https" || !strings.HasPrefix(u.Host, "6080-") || u.Path != "/vnc.html" || u.Query().Get("autoconnect") != "true" {
		t.Fatalf("the stream URL %q is not noVNC's page on the sandbox's port 6080", stream)
	}
	// *.localhost is the loopback; the front is on d.e2bAddr's port.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, d.e2bAddr)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	resp, err := hc.Get(stream)
	if err != nil {
		t.Fatalf("GET the stream URL: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(page, []byte("noVNC")) {
		t.Fatalf("GET the stream URL: %d %q", resp.StatusCode, tail(string(page), 300))
	}
	ws := "wss://" + u.Host + "/websockify"
	if got := rfbGreeting(t, ws, hc, nil); got != "RFB 003.008\n" {
		t.Errorf("the stream's WebSocket greeted with %q, want RFB 003.008", got)
	}
	id, _ := f.facts["create"]["sandboxId"].(string)
	if err := d.client.DeleteSandbox(t.Context(), id); err != nil {
		t.Error(err)
	}
}

// rfbGreeting opens a WebSocket to a noVNC stream and returns the VNC
// server's first message.
func rfbGreeting(t *testing.T, ws string, hc *http.Client, header http.Header) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: header, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatalf("WebSocket to %s: %v", ws, err)
	}
	defer c.CloseNow()
	_, msg, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("WebSocket to %s: %v", ws, err)
	}
	return string(msg)
}

// desktopPageHTML is a page with a text field and a button: the button
// greets the name typed, Enter in the field says it, both in the page's
// title, which is its window's.
const desktopPageHTML = `<!doctype html>
<html><head><title>Hutch desktop</title>
<style>
body { margin: 0; font: 24px sans-serif }
#name { position: absolute; left: 100px; top: 150px; width: 500px; height: 100px; font-size: 32px }
#go { position: absolute; left: 100px; top: 350px; width: 300px; height: 100px; font-size: 32px }
</style></head>
<body><input id="name" autocomplete="off"><button id="go">Greet</button>
<script>
const name = document.getElementById("name")
document.getElementById("go").onclick = () => { document.title = "Hello, " + name.value }
name.addEventListener("keydown", (e) => { if (e.key === "Enter") document.title = "Enter: " + name.value })
</script></body></html>`

// desktopPage makes a desktop sandbox under runtime that serves
// desktopPageHTML, starts its desktop and shows the page in Chromium, full
// screen; it returns the sandbox's id.
func desktopPage(t *testing.T, d *daemon, runtime string) string {
	t.Helper()
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Template: "desktop", Runtime: runtime, MemoryMB: 2048, Pids: 2048, Files: map[string]string{"index.html": desktopPageHTML}})
	if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: "python3 -m http.server 3000", Port: 3000}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
	desk, err := d.client.StartDesktop(ctx, sb.ID, client.DesktopRequest{Width: 1024, Height: 768})
	if err != nil {
		t.Fatalf("start the desktop: %v", err)
	}
	if !desk.Running || desk.Width != 1024 || desk.Height != 768 {
		t.Fatalf("the desktop started as %+v", desk)
	}
	// Started again at its size, it is left as it is; at another, refused.
	if _, err := d.client.StartDesktop(ctx, sb.ID, client.DesktopRequest{}); err != nil {
		t.Errorf("start the running desktop again: %v", err)
	}
	var apiErr *client.Error
	if _, err := d.client.StartDesktop(ctx, sb.ID, client.DesktopRequest{Width: 800, Height: 600}); !errors.As(err, &apiErr) || apiErr.Code != "conflict" {
		t.Errorf("start the desktop at another size: %v, want a conflict", err)
	}
	if _, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{
		Name: "chromium", Env: map[string]string{"DISPLAY": ":0"},
		Cmd: []string{"chromium", "--kiosk", "--test-type", "--no-first-run", "--noerrdialogs", "--disable-gpu", "--password-store=basic", "--user-data-dir=/tmp/chromium", "http://localhost:3000/"},
	}); err != nil {
		t.Fatal(err)
	}
	waitTitle(t, d, sb.ID, "Hutch desktop")
	return sb.ID
}

// waitTitle waits until Chromium's window in sandbox id has a title
// holding want.
func waitTitle(t *testing.T, d *daemon, id, want string) {
	t.Helper()
	title := ""
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		res := d.exec(id, "DISPLAY=:0 xdotool search --onlyvisible --class chromium getwindowname 2>/dev/null")
		if title = res.Stdout; strings.Contains(title, want) {
			return
		}
	}
	t.Fatalf("Chromium's window is titled %q, not %q", title, want)
}

// desktopAPI drives the page with Hutch's desktop API: a screenshot of
// the screen's size, a click into the field, typing, a click on the
// button, the page greeting what was typed; the actions' screenshot,
// the recent actions, refusals, and the live view's links.
func desktopAPI(t *testing.T, d *daemon, id string) {
	ctx := t.Context()
	shot, err := d.client.DesktopScreenshot(ctx, id, client.DesktopShot{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(shot)); err != nil || cfg.Width != 1024 || cfg.Height != 768 {
		t.Errorf("the screenshot: %+v %v, want a 1024x768 PNG", cfg, err)
	}
	region, err := d.client.DesktopScreenshot(ctx, id, client.DesktopShot{Region: &client.Clip{X: 100, Y: 100, W: 400, H: 200}, Scale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(region)); err != nil || cfg.Width != 200 || cfg.Height != 100 {
		t.Errorf("a region at half scale: %+v %v, want 200x100", cfg, err)
	}
	res, err := d.client.DesktopActions(ctx, id, client.DesktopActionsRequest{
		Actions: []client.DesktopAction{
			{Type: "click", X: client.At(300), Y: client.At(220)},
			{Type: "type", Text: "hutch"},
			{Type: "click", X: client.At(250), Y: client.At(420)},
		},
		Screenshot: &client.DesktopShot{Scale: 0.5},
	})
	if err != nil {
		t.Fatalf("the actions: %v", err)
	}
	if res.Cursor != (client.Point{X: 250, Y: 420}) {
		t.Errorf("the pointer is at %+v after the actions, want 250,420", res.Cursor)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(res.Screenshot)); err != nil || cfg.Width != 512 || cfg.Height != 384 {
		t.Errorf("the actions' screenshot: %+v %v, want 512x384", cfg, err)
	}
	waitTitle(t, d, id, "Hello, hutch")
	desk, err := d.client.Desktop(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var recent []string
	for _, e := range desk.Recent {
		recent = append(recent, e.Action)
	}
	if want := []string{"click at 300,220", `type "hutch"`, "click at 250,420"}; strings.Join(recent, "|") != strings.Join(want, "|") {
		t.Errorf("the recent actions are %q, want %q", recent, want)
	}
	for _, bad := range []client.DesktopAction{{Type: "click", X: client.At(5000), Y: client.At(1)}, {Type: "key", Keys: "--clearmodifiers"}, {Type: "fly"}} {
		var apiErr *client.Error
		if _, err := d.client.DesktopActions(ctx, id, client.DesktopActionsRequest{Actions: []client.DesktopAction{bad}}); !errors.As(err, &apiErr) || apiErr.Code != "invalid_argument" {
			t.Errorf("action %+v: %v, want invalid_argument", bad, err)
		}
	}
	for _, control := range []bool{false, true} {
		link, err := d.client.DesktopStream(ctx, id, client.DesktopStreamRequest{Control: control})
		if err != nil {
			t.Fatal(err)
		}
		port := map[bool]string{false: "6091-", true: "6090-"}[control]
		if !strings.Contains(link.URL, "://"+port+id+".") || strings.Contains(link.URL, "view_only=true") == control {
			t.Errorf("the stream link (control %v) is %s", control, link.URL)
		}
		hc, _ := linkClient(t, d, link.URL)
		if got := rfbGreeting(t, "ws://"+port+id+".localhost:"+portOf(d.addr)+"/websockify", hc, nil); got != "RFB 003.008\n" {
			t.Errorf("the stream (control %v) greeted with %q", control, got)
		}
	}
}

// linkClient opens a preview link as a browser does (its cookie kept) and
// returns the client, and the page's body.
func linkClient(t *testing.T, d *daemon, link string) (*http.Client, []byte) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, d.addr)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dial}}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatalf("GET %s: %v", link, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("noVNC")) {
		t.Fatalf("GET %s: %d %q", link, resp.StatusCode, tail(string(body), 300))
	}
	return hc, body
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// mcpDesktopClient installs the official MCP client beside
// testdata/mcp-desktop.mjs and returns the script's path.
func mcpDesktopClient(t *testing.T) string {
	t.Helper()
	dir := filepath.Dir(mcpClient(t))
	script, err := os.ReadFile("testdata/mcp-desktop.mjs")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp-desktop.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mcpDesktop drives the page with the computer tools from the official
// MCP client: a screenshot, a triple click selecting the field's text,
// typing over it and Enter, which the page says in its title.
func mcpDesktop(t *testing.T, d *daemon, script, id string) {
	out := runNode(t, []string{"HUTCH_API_KEY=" + d.key}, script, "http://"+d.addr+"/mcp", id)
	type result struct {
		IsError bool
		Text    string
		Images  []struct{ MimeType, Bytes string }
	}
	var got map[string]result
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output %q: %v", out, err)
	}
	for name, r := range got {
		if r.IsError {
			t.Errorf("%s failed: %s", name, r.Text)
		}
	}
	if s := got["screenshot"]; len(s.Images) != 1 || s.Images[0].MimeType != "image/png" || !strings.Contains(s.Text, `"width":1024`) {
		t.Errorf("sandbox_computer_screenshot: %+v", s)
	}
	if k := got["key"]; len(k.Images) != 1 || !strings.Contains(k.Text, `"cursor"`) {
		t.Errorf("sandbox_computer_key with a screenshot: %+v", k)
	}
	if c := got["cursor"]; !strings.Contains(c.Text, `"x":300`) || !strings.Contains(c.Text, `"y":220`) {
		t.Errorf("sandbox_computer_cursor_position: %+v", c)
	}
	waitTitle(t, d, id, "Enter: mcp")
}

// TestAttackDesktopViewOnly: a view-only link to a desktop's live view
// gives no control, under each runtime. Its token opens neither the
// control stream's port nor another service; input sent over its
// WebSocket, as a viewer's page may send whatever its client says, moves
// nothing, where the same over a control link does (the check can fail).
func TestAttackDesktopViewOnly(t *testing.T) {
	t.Parallel()
	d, _ := desktopDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Template: "desktop", Runtime: runtime})
		if _, err := d.client.StartDesktop(ctx, sb.ID, client.DesktopRequest{}); err != nil {
			t.Fatal(err)
		}
		view, err := d.client.DesktopStream(ctx, sb.ID, client.DesktopStreamRequest{})
		if err != nil {
			t.Fatal(err)
		}
		viewer, _ := linkClient(t, d, view.URL)
		u, _ := url.Parse(view.URL)
		token := u.Query().Get("hutch_preview_token")
		port := portOf(d.addr)
		controlHost := "http://6090-" + sb.ID + ".localhost:" + port
		for what, target := range map[string]string{
			"the control port with the view link's cookie": controlHost + "/vnc.html",
			"the control port with the view link's token":  controlHost + "/vnc.html?hutch_preview_token=" + url.QueryEscape(token),
			"the web port with the view link's token":      "http://3000-" + sb.ID + ".localhost:" + port + "/?hutch_preview_token=" + url.QueryEscape(token),
		} {
			resp, err := viewer.Get(target)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d, want it refused", what, resp.StatusCode)
			}
		}

		// The pointer starts at 10,10; each stream is told to move it.
		move := func(hc *http.Client, host string, x, y int) {
			t.Helper()
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			ws, _, err := websocket.Dial(wctx, "ws://"+host+sb.ID+".localhost:"+port+"/websockify", &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{"binary"}})
			if err != nil {
				t.Fatal(err)
			}
			conn := websocket.NetConn(wctx, ws, websocket.MessageBinary)
			defer conn.Close()
			vnc, err := rfb.Handshake(conn)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []byte{0, 1, 0} { // a left click at x, y
				if err := vnc.Pointer(x, y, b); err != nil {
					t.Fatal(err)
				}
			}
			const keyA = 0x61
			if err := vnc.Key(keyA, true); err != nil {
				t.Fatal(err)
			}
			if err := vnc.Key(keyA, false); err != nil {
				t.Fatal(err)
			}
			// The server has read them once it answers after them.
			if err := vnc.RequestUpdate(false); err != nil {
				t.Fatal(err)
			}
			if _, err := vnc.ReadUpdate(); err != nil {
				t.Fatal(err)
			}
		}
		cursor := func() client.Point {
			t.Helper()
			desk, err := d.client.Desktop(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			return desk.Cursor
		}
		if _, err := d.client.DesktopActions(ctx, sb.ID, client.DesktopActionsRequest{Actions: []client.DesktopAction{{Type: "move", X: client.At(10), Y: client.At(10)}}}); err != nil {
			t.Fatal(err)
		}
		move(viewer, "6091-", 300, 300)
		time.Sleep(time.Second) // what the server took has reached the display
		if got := cursor(); got != (client.Point{X: 10, Y: 10}) {
			t.Errorf("input over the view-only stream moved the pointer to %+v", got)
		}
		control, err := d.client.DesktopStream(ctx, sb.ID, client.DesktopStreamRequest{Control: true})
		if err != nil {
			t.Fatal(err)
		}
		controller, _ := linkClient(t, d, control.URL)
		move(controller, "6090-", 300, 300)
		got := cursor()
		for end := time.Now().Add(10 * time.Second); got != (client.Point{X: 300, Y: 300}) && time.Now().Before(end); got = cursor() {
			time.Sleep(200 * time.Millisecond)
		}
		if got != (client.Point{X: 300, Y: 300}) {
			t.Errorf("input over the control stream left the pointer at %+v, want 300,300", got)
		}
	})
}

// idleDesktop: a desktop's own processes do not keep its sandbox awake,
// a viewer of its live view does; a call wakes it, and under gVisor its
// windows are as they were.
func idleDesktop(t *testing.T, d *daemon, runtime string) {
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Template: "desktop", Runtime: runtime, IdleTimeoutS: 3})
	if _, err := d.client.StartDesktop(ctx, sb.ID, client.DesktopRequest{}); err != nil {
		t.Fatal(err)
	}
	if res := d.exec(sb.ID, "DISPLAY=:0 setsid xfce4-terminal --title=kept >/dev/null 2>&1 & sleep 0.1"); res.ExitCode != 0 {
		t.Fatalf("start a terminal: %+v", res)
	}
	windows := func() string {
		return strings.TrimSpace(d.exec(sb.ID, "DISPLAY=:0 xdotool search --onlyvisible --name '^kept$' 2>/dev/null").Stdout)
	}
	waitFor(t, 60*time.Second, "the terminal's window", func() bool { return windows() != "" })
	state := func() string {
		got, err := d.client.GetSandbox(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}

	// A viewer holds it awake for twice its idle timeout.
	link, err := d.client.DesktopStream(ctx, sb.ID, client.DesktopStreamRequest{})
	if err != nil {
		t.Fatal(err)
	}
	viewer, _ := linkClient(t, d, link.URL)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(wctx, "ws://6091-"+sb.ID+".localhost:"+portOf(d.addr)+"/websockify", &websocket.DialOptions{HTTPClient: viewer, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	if got := state(); got != "running" {
		t.Errorf("with a viewer of its live view, the sandbox is %s", got)
	}
	ws.CloseNow()
	waitFor(t, 60*time.Second, "the sandbox to suspend when idle", func() bool { return state() == "suspended" })

	// Asked of, the desktop of a suspended sandbox does not run, and the
	// sandbox sleeps on; a screenshot wakes it, and the desktop shows again.
	if desk, err := d.client.Desktop(ctx, sb.ID); err != nil || desk.Running || state() != "suspended" {
		t.Errorf("the desktop of a suspended sandbox: %+v %v, the sandbox %s", desk, err, state())
	}
	if _, err := d.client.DesktopScreenshot(ctx, sb.ID, client.DesktopShot{}); err != nil {
		t.Fatalf("a screenshot after a wake: %v", err)
	}
	if desk, err := d.client.Desktop(ctx, sb.ID); err != nil || !desk.Running {
		t.Errorf("the desktop after a wake: %+v %v", desk, err)
	}
	if runtime == "gvisor" && windows() == "" {
		t.Errorf("the terminal's window is gone after the suspend")
	}
}

// consoleDesktop runs test/console/desktop.test.mjs: the console's live
// view shows the desktop, and changes after an action.
func consoleDesktop(t *testing.T, d *daemon) {
	r := newConsoleRunner(t)
	sb := d.create(client.CreateSandboxRequest{Template: "desktop"})
	if _, err := d.client.StartDesktop(t.Context(), sb.ID, client.DesktopRequest{}); err != nil {
		t.Fatal(err)
	}
	res := r.run(t, d, filepath.Join(r.dir, "desktop.test.mjs"), "SANDBOX="+sb.ID)
	var got struct {
		Colours int
		Changed bool
	}
	if err := json.Unmarshal(res.Values, &got); err != nil || !got.Changed || got.Colours < 4 {
		t.Errorf("the script's values %s: %v", res.Values, err)
	}
	if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
		t.Error(err)
	}
}
