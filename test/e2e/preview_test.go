package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
)

// previewServer is the sandbox's web server in these tests: Python's
// standard library, with a WebSocket echo of its own (the handshake and
// unfragmented frames). It logs every request it gets to previewLog.
const previewServer = `
import base64, hashlib, http.server, struct, sys, time

PORT = int(sys.argv[1])
BLOCK = bytes(i % 251 for i in range(65536))

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def note(self):
        with open("/tmp/preview-requests.log", "a") as f:
            f.write(self.command + " " + self.path + "\n")

    def answer(self, body, ctype="text/plain"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.note()
        if self.path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"data: event %d\n\n" % i)
                self.wfile.flush()
                time.sleep(0.4)
            self.close_connection = True
        elif self.path.startswith("/big/"):
            n = int(self.path[5:])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            while n > 0:
                chunk = BLOCK[:min(n, len(BLOCK))]
                self.wfile.write(chunk)
                n -= len(chunk)
        elif self.path == "/ws":
            self.websocket()
        else:
            peer = self.client_address[1]
            self.answer(("port %d path %s peer %d host %s auth %r hutch %r cookie %r xff %r prefix %r" % (
                PORT, self.path, peer, self.headers.get("Host"), self.headers.get("Authorization"),
                self.headers.get("Hutch-User"), self.headers.get("Cookie"),
                self.headers.get("X-Forwarded-For"), self.headers.get("X-Forwarded-Prefix"))).encode())

    def do_POST(self):
        self.note()
        n = int(self.headers["Content-Length"])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        while n > 0:
            chunk = self.rfile.read(min(n, 65536))
            if not chunk:
                break
            self.wfile.write(chunk)
            n -= len(chunk)

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.frame(8, data)
                return
            if op == 9:
                self.frame(10, data)
            elif op in (1, 2):
                self.frame(op, b"echo " + data)

    def frame(self, op, data):
        n = len(data)
        head = bytes([0x80 | op]) + (bytes([n]) if n < 126 else bytes([126]) + struct.pack(">H", n))
        self.wfile.write(head + data)
        self.wfile.flush()

http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
`

// previewPort is the port the test's server listens on in its sandbox.
const previewPort = 8000

// previewer reaches a daemon's previews by path and by host.
type previewer struct {
	d  *daemon
	id string
	// hc dials the daemon whatever the URL's host, as a browser resolves
	// *.localhost to the loopback.
	hc *http.Client
}

func newPreviewer(t *testing.T, d *daemon, id string) *previewer {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "tcp", d.addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &previewer{d: d, id: id, hc: &http.Client{Transport: tr}}
}

// pathURL and hostURL are the URLs of p on port by path and by host.
func (p *previewer) pathURL(port int, path string) string {
	return fmt.Sprintf("http://%s/v1/sandboxes/%s/ports/%d%s", p.d.addr, p.id, port, path)
}

func (p *previewer) hostURL(port int, path string) string {
	_, apiPort, _ := net.SplitHostPort(p.d.addr)
	return fmt.Sprintf("http://%d-%s.localhost:%s%s", port, p.id, apiPort, path)
}

// get makes a request with key ("" for none) and returns the answer's
// status, header and body.
func (p *previewer) do(t *testing.T, method, url, key string, body io.Reader, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// startPreviewServer writes the server into the sandbox and starts it as
// background process name (which a resume starts again) after delay; it
// waits until it answers through the preview.
func startPreviewServer(t *testing.T, d *daemon, p *previewer, name, delay string) {
	t.Helper()
	if _, err := d.client.WriteFile(t.Context(), p.id, "/tmp/server.py", strings.NewReader(previewServer)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.StartProcess(t.Context(), p.id, client.StartProcessRequest{
		Name: name, Command: fmt.Sprintf("sleep %s; exec python3 /tmp/server.py %d", delay, previewPort), Port: previewPort,
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the server to answer through its preview", func() bool {
		status, _, _ := p.do(t, http.MethodGet, p.pathURL(previewPort, "/ready"), d.key, nil, nil)
		return status == http.StatusOK
	})
}

// suspendIdle suspends sandbox id once no request holds it.
func suspendIdle(t *testing.T, d *daemon, id string) {
	t.Helper()
	haltIdle(t, id, d.client.SuspendSandbox)
}

// haltIdle suspends or stops sandbox id, by halt, once no request holds
// it: the one answered last may still hold it for a moment after its
// last byte, and halting is refused (conflict) meanwhile.
func haltIdle(t *testing.T, id string, halt func(context.Context, string) (*client.Sandbox, error)) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := halt(t.Context(), id)
		if err == nil {
			return
		}
		if !client.IsConflict(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// requestsSeen is how many requests the sandbox's server logged.
func requestsSeen(t *testing.T, d *daemon, id string) int {
	t.Helper()
	return strings.Count(d.exec(id, "cat /tmp/preview-requests.log 2>/dev/null").Stdout, "\n")
}

// A server in a sandbox without network is reached by path and by host:
// keep-alive, an event stream whose events come as they are written, a
// WebSocket, a large download and a large upload streamed both ways;
// nothing meant for Hutch reaches it. Only the sandbox's workspace's keys
// reach it. A suspended sandbox is woken by a browser's request, which is
// answered a waking page until the server is back; other requests wait.
func TestPreview(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
		p := newPreviewer(t, d, sb.ID)
		startPreviewServer(t, d, p, "web", "0")

		t.Run("routing", func(t *testing.T) { testPreviewRouting(t, p) })
		t.Run("streams", func(t *testing.T) { testPreviewStreams(t, p) })
		t.Run("access", func(t *testing.T) { testPreviewAccess(t, p) })
		t.Run("wake", func(t *testing.T) { testPreviewWake(t, p, runtime) })
		if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// Path and host routing reach the server with its path and query, the
// client's Host, where the request came from, and no key, Hutch header
// or Hutch cookie; two requests share one connection (keep-alive), to the
// daemon and from it to the server.
func testPreviewRouting(t *testing.T, p *previewer) {
	d := p.d
	header := http.Header{"Hutch-User": {"alice"}, "Cookie": {"hutch_preview=link; theme=dark"}}
	for _, tt := range []struct{ name, url, host, prefix string }{
		{"by path", p.pathURL(previewPort, "/a/b?x=1"), d.addr, fmt.Sprintf("'/v1/sandboxes/%s/ports/%d'", p.id, previewPort)},
		{"by host", p.hostURL(previewPort, "/a/b?x=1"), strings.TrimPrefix(p.hostURL(previewPort, ""), "http://"), "None"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reused []bool
			var peers []string
			for range 2 {
				ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }})
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tt.url, nil)
				req.Header = header.Clone()
				req.Header.Set("Authorization", "Bearer "+d.key)
				resp, err := p.hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := fmt.Sprintf("port %d path /a/b?x=1 peer ", previewPort)
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), want) {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				fields := strings.Fields(string(body))
				peers = append(peers, fields[5])
				rest := strings.Join(fields[6:], " ")
				wantRest := fmt.Sprintf("host %s auth None hutch None cookie 'theme=dark' xff '127.0.0.1' prefix %s", tt.host, tt.prefix)
				if rest != wantRest {
					t.Errorf("the server saw %q, want %q", rest, wantRest)
				}
			}
			if len(reused) != 2 || !reused[1] {
				t.Errorf("the second request did not reuse the connection to the daemon: %v", reused)
			}
			if peers[0] != peers[1] {
				t.Errorf("the server saw two connections (%v), not one kept alive", peers)
			}
		})
	}
}

// Event streams, WebSockets and large bodies stream through, by path and
// by host.
func testPreviewStreams(t *testing.T, p *previewer) {
	d := p.d
	for _, base := range []struct{ name, url string }{{"by path", p.pathURL(previewPort, "")}, {"by host", p.hostURL(previewPort, "")}} {
		t.Run(base.name, func(t *testing.T) {
			// Each event comes as it is written (0.4 s apart), before the
			// stream ends.
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base.url+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+d.key)
			resp, err := p.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(resp.Body)
			var at []time.Time
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				if strings.HasPrefix(line, "data: ") {
					at = append(at, time.Now())
				}
			}
			end := time.Now()
			resp.Body.Close()
			if len(at) != 3 || end.Sub(at[0]) < 600*time.Millisecond {
				t.Errorf("events at %v, the stream's end at %v: want 3, the first well before the end", at, end)
			}

			// A WebSocket echoes.
			wsURL := "ws" + strings.TrimPrefix(base.url, "http") + "/ws"
			ws, _, err := websocket.Dial(t.Context(), wsURL, &websocket.DialOptions{
				HTTPClient: p.hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + d.key}},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range []string{"hello", strings.Repeat("x", 1000)} {
				if err := ws.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
					t.Fatal(err)
				}
				if _, got, err := ws.Read(t.Context()); err != nil || string(got) != "echo "+msg {
					t.Fatalf("WebSocket echo: %.40q, %v", got, err)
				}
			}
			_ = ws.Close(websocket.StatusNormalClosure, "")

			// 20 MiB down, and 20 MiB up echoed back as it comes.
			const size = 20 << 20
			status, _, body := p.do(t, http.MethodGet, base.url+fmt.Sprintf("/big/%d", size), d.key, nil, nil)
			if status != http.StatusOK || len(body) != size || sha256.Sum256(body) != sha256.Sum256(bigBody(size)) {
				t.Errorf("download: %d, %d bytes", status, len(body))
			}
			up := bigBody(size)
			up[12345] = 'x'
			status, _, body = p.do(t, http.MethodPost, base.url+"/upload", d.key, bytes.NewReader(up), nil)
			if status != http.StatusOK || !bytes.Equal(body, up) {
				t.Errorf("upload echo: %d, %d bytes back", status, len(body))
			}
		})
	}
}

// bigBody is what the server's /big/N sends.
func bigBody(n int) []byte {
	block := make([]byte, 65536)
	for i := range block {
		block[i] = byte(i % 251)
	}
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, block[:min(n-len(b), len(block))]...)
	}
	return b
}

// Without a key it is 401; another workspace's key finds no sandbox; the
// server sees neither request.
func testPreviewAccess(t *testing.T, p *previewer) {
	d := p.d
	other, err := d.client.CreateAPIKeyWith(t.Context(), client.CreateAPIKeyRequest{Name: "other-" + p.id, Workspace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	before := requestsSeen(t, d, p.id)
	for _, tt := range []struct {
		name, url, key string
		want           int
	}{
		{"no key, by path", p.pathURL(previewPort, "/"), "", http.StatusUnauthorized},
		{"no key, by host", p.hostURL(previewPort, "/"), "", http.StatusUnauthorized},
		{"a wrong key", p.hostURL(previewPort, "/"), "hutch_wrong", http.StatusUnauthorized},
		{"another workspace's key, by path", p.pathURL(previewPort, "/"), other.Key, http.StatusNotFound},
		{"another workspace's key, by host", p.hostURL(previewPort, "/"), other.Key, http.StatusNotFound},
	} {
		if status, _, body := p.do(t, http.MethodGet, tt.url, tt.key, nil, nil); status != tt.want || !bytes.Contains(body, []byte(`"error"`)) {
			t.Errorf("%s: %d %s, want %d", tt.name, status, body, tt.want)
		}
	}
	if after := requestsSeen(t, d, p.id); after != before {
		t.Errorf("the server saw %d requests it should not have", after-before)
	}
	// Nothing listening, and a stopped sandbox, say so.
	if status, _, body := p.do(t, http.MethodGet, p.pathURL(previewPort+1, "/"), d.key, nil, nil); status != http.StatusBadGateway ||
		!bytes.Contains(body, []byte("bad_gateway")) || !bytes.Contains(body, []byte("nothing listens on port")) {
		t.Errorf("a port nothing listens on: %d %s", status, body)
	}
}

// A suspended sandbox is woken by a browser's request, which gets the
// waking page until the server, started again with the sandbox, answers;
// a request that is no page load waits for the wake and is served. Under
// gVisor the suspend kept the server's memory: it comes back as it was,
// and the page shows only if the restore takes more than a second.
func testPreviewWake(t *testing.T, p *previewer, runtime string) {
	d := p.d
	// Under runc the server takes 2 s to come back: the page load waits
	// longer than a second.
	if err := d.client.DeleteProcess(t.Context(), p.id, "web"); err != nil {
		t.Fatal(err)
	}
	startPreviewServer(t, d, p, "slow-web", "2")
	html := http.Header{"Accept": {"text/html,application/xhtml+xml,*/*;q=0.8"}}
	suspendIdle(t, d, p.id)
	status, h, body := p.do(t, http.MethodGet, p.hostURL(previewPort, "/page"), d.key, nil, html)
	waking := h.Get("Hutch-Preview") == "waking"
	switch {
	case status != http.StatusOK:
		t.Fatalf("the first page load of a suspended sandbox: %d %s", status, body)
	case waking && (h.Get("Cache-Control") != "no-store" || !bytes.Contains(body, []byte(`http-equiv="refresh"`))):
		t.Fatalf("the waking page: %v %s", h, body)
	case !waking && (runtime == "runc" || !bytes.HasPrefix(body, []byte("port"))):
		t.Fatalf("the first page load of a suspended sandbox whose server takes 2 s to start: %v %s", h, body)
	}
	// The browser reloads each second until the app answers.
	waitFor(t, 60*time.Second, "the app to answer the page's reload", func() bool {
		status, h, body := p.do(t, http.MethodGet, p.hostURL(previewPort, "/page"), d.key, nil, html)
		return status == http.StatusOK && h.Get("Hutch-Preview") == "" && bytes.HasPrefix(body, []byte("port"))
	})
	if procs, err := d.client.ListProcesses(t.Context(), p.id); err != nil || len(procs) != 1 || procs[0].Status != client.ProcessRunning {
		t.Errorf("the server after the wake: %+v, %v", procs, err)
	}
	suspendIdle(t, d, p.id)
	status, h, body = p.do(t, http.MethodGet, p.pathURL(previewPort, "/api"), d.key, nil, nil)
	if status != http.StatusOK || h.Get("Hutch-Preview") != "" || !bytes.HasPrefix(body, []byte("port")) {
		t.Errorf("a request that is no page load, to a suspended sandbox: %d %s", status, body)
	}
	// A stopped sandbox is not started: the error says how.
	haltIdle(t, p.id, d.client.StopSandbox)
	if status, _, body := p.do(t, http.MethodGet, p.pathURL(previewPort, "/"), d.key, nil, nil); status != http.StatusPreconditionFailed || !bytes.Contains(body, []byte("/start")) {
		t.Errorf("a stopped sandbox: %d %s", status, body)
	}
}

// An open WebSocket to a preview keeps its sandbox from idling; once it
// is closed, the sandbox idles on time.
func TestPreviewKeepsAwake(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, IdleTimeoutS: 2, Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
		p := newPreviewer(t, d, sb.ID)
		if _, err := d.client.WriteFile(t.Context(), sb.ID, "/tmp/server.py", strings.NewReader(previewServer)); err != nil {
			t.Fatal(err)
		}
		// Left behind by a command, not a background process: nothing
		// but the preview keeps the sandbox awake.
		if _, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{
			Command:  fmt.Sprintf("setsid python3 /tmp/server.py %d </dev/null >/dev/null 2>&1 &", previewPort),
			TimeoutS: 600,
		}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the server to answer", func() bool {
			status, _, _ := p.do(t, http.MethodGet, p.pathURL(previewPort, "/"), d.key, nil, nil)
			return status == http.StatusOK
		})
		ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(p.hostURL(previewPort, "/ws"), "http"), &websocket.DialOptions{
			HTTPClient: p.hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + d.key}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			if s, err := d.client.GetSandbox(t.Context(), sb.ID); err != nil || s.State != client.StateRunning {
				t.Fatalf("with a WebSocket open, 2 s idle timeout: %+v, %v", s, err)
			}
		}
		if err := ws.Write(t.Context(), websocket.MessageText, []byte("still there")); err != nil {
			t.Fatal(err)
		}
		if _, got, err := ws.Read(t.Context()); err != nil || string(got) != "echo still there" {
			t.Fatalf("echo after 7 s: %q, %v", got, err)
		}
		_ = ws.Close(websocket.StatusNormalClosure, "")
		closed := time.Now()
		waitFor(t, 15*time.Second, "the sandbox to idle once the WebSocket closed", func() bool {
			s, err := d.client.GetSandbox(t.Context(), sb.ID)
			return err == nil && (s.State == client.StateSuspending || s.State == client.StateSuspended)
		})
		if after := time.Since(closed); after < 2*time.Second {
			t.Errorf("idled %v after the WebSocket closed, before its idle timeout of 2 s", after)
		}
		waitFor(t, 60*time.Second, "the suspend to end", func() bool {
			s, err := d.client.GetSandbox(t.Context(), sb.ID)
			return err == nil && s.State == client.StateSuspended
		})
		if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}
