package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/egress"
)

// previewServer is row (j)'s web server, run alike in the sandbox and on
// the host: Python's http.server with keep-alive, answering / with a few
// bytes and /big with previewBig bytes.
const previewServer = `import http.server, sys
BLOCK = bytes(1 << 20)
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *args):
        pass
    def do_GET(self):
        n = 256 << 20 if self.path == "/big" else 0
        body = b"" if n else b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(n or len(body)))
        self.end_headers()
        self.wfile.write(body)
        for _ in range(n >> 20):
            self.wfile.write(BLOCK)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
`

// previewBig is the size of the server's /big.
const previewBig = 256 << 20

// previewPort is where the server listens in the sandbox.
const previewPort = 8000

// measurePreview is row (j), previews: the same small web server in a
// runc sandbox without network and on the host's loopback (a sandbox's
// server cannot be reached directly with network mode none: the host's
// twin is the direct request on the same machine);
//
//   - GET / through the preview (path routing, keep-alive) against the
//     same request straight to the host's server: what the preview adds;
//   - a 256 MiB download both ways, and through a bare relay on the host
//     (one hop that splices the connections, as row (h)'s): a proxy's
//     floor here, since the preview's bytes make two hops (the agent's,
//     spliced, and the daemon's);
//   - wake on request: the sandbox suspended, the first preview request
//     until its whole answer (the sandbox resumes, its server starts
//     again, the request is served).
func (b *bench) measurePreview(ctx context.Context) (_ section, err error) {
	c := b.d.client
	script := filepath.Join(b.dir, "preview-server.py")
	if err := os.WriteFile(script, []byte(previewServer), 0o600); err != nil {
		return section{}, err
	}
	// With the host's CPUs, as the host's server has: the row is about the
	// way the bytes go, not the sandbox's CPU limit.
	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc", CPUs: float64(runtime.NumCPU()),
		Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, c, sb.ID)) }()
	if _, err := c.WriteFile(ctx, sb.ID, "/tmp/server.py", strings.NewReader(previewServer)); err != nil {
		return section{}, err
	}
	if _, err := c.StartProcess(ctx, sb.ID, client.StartProcessRequest{
		Name: "web", Cmd: []string{"python3", "/tmp/server.py", strconv.Itoa(previewPort)}, Port: previewPort,
	}); err != nil {
		return section{}, err
	}
	host, err := startHostServer(ctx, script)
	if err != nil {
		return section{}, err
	}
	defer host.stop()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	previewURL := fmt.Sprintf("http://%s/v1/sandboxes/%s/ports/%d", b.d.addr, sb.ID, previewPort)
	get := func(url string) func(context.Context) (time.Duration, error) {
		return func(ctx context.Context) (time.Duration, error) {
			start := time.Now()
			if err := fetch(ctx, hc, url, b.d.key); err != nil {
				return 0, err
			}
			return time.Since(start), nil
		}
	}
	if err := waitAnswer(ctx, get(previewURL+"/")); err != nil {
		return section{}, fmt.Errorf("the sandbox's server: %w", err)
	}

	viaPreview, direct := &peer{name: "preview", run: get(previewURL + "/")}, &peer{name: "direct", run: get(host.url + "/")}
	if err := b.interleave(ctx, "(j) GET / through the preview and direct", b.cfg.n, viaPreview, direct); err != nil {
		return section{}, err
	}
	added := median(viaPreview.samples) - median(direct.samples)
	relay, err := newBareRelay(host.url)
	if err != nil {
		return section{}, err
	}
	defer func() {
		hc.CloseIdleConnections() // the relay's connections end with them
		relay.close()
	}()
	bigPreview, bigDirect := &peer{name: "preview", run: get(previewURL + "/big")}, &peer{name: "direct", run: get(host.url + "/big")}
	bigRelayed := &peer{name: "bare relay", run: get(relay.url + "/big")}
	if err := b.interleave(ctx, "(j) 256 MiB download through the preview, direct and through a bare relay", 11, bigPreview, bigDirect, bigRelayed); err != nil {
		return section{}, err
	}
	mbps := func(d []time.Duration) []float64 { return rates(previewBig, d) }
	r := ratio(median(mbps(bigPreview.samples)), median(mbps(bigDirect.samples)))
	floor := ratio(median(mbps(bigRelayed.samples)), median(mbps(bigDirect.samples)))

	wake := &peer{name: "wake", run: func(ctx context.Context) (time.Duration, error) {
		if err := suspendIdle(ctx, c, sb.ID); err != nil {
			return 0, err
		}
		return get(previewURL + "/")(ctx)
	}}
	if err := b.interleave(ctx, "(j) wake on request", b.cfg.createN, wake); err != nil {
		return section{}, err
	}
	return section{title: "(j) previews: a web server in a runc sandbox (network none) through its preview, and its twin on the host", rows: []row{
		durationRow("GET / through the preview (path routing, keep-alive)", viaPreview.samples),
		durationRow("GET / straight to the same server on the host", direct.samples),
		{label: "  added by the preview", median: fmtDuration(added), target: target(added <= time.Millisecond, "≤ 1 ms")},
		rateRow("256 MiB download through the preview", mbps(bigPreview.samples)),
		rateRow("256 MiB download straight from the host's server", mbps(bigDirect.samples)),
		rateRow("the same through a bare relay on the host (one spliced hop, no sandbox: a proxy's floor)", mbps(bigRelayed.samples)),
		{label: "  ratio preview / direct", median: fmtRatio(r), target: target(r >= 0.5, "≥ 0.5× direct")},
		{label: "  the floor: bare relay / direct", median: fmtRatio(floor)},
		{label: "  preview / bare relay", median: fmtRatio(ratio(median(mbps(bigPreview.samples)), median(mbps(bigRelayed.samples))))},
		durationRow("wake on request: suspended → the first preview answer (resume, the server's start, the request)", wake.samples),
	}, results: previewResults(viaPreview.samples, direct.samples, mbps(bigPreview.samples), mbps(bigDirect.samples), mbps(bigRelayed.samples), wake.samples)}, nil
}

// previewResults are row (j)'s lines of docs/performance.md.
func previewResults(viaPreview, direct []time.Duration, bigPreview, bigDirect, bigRelayed []float64, wake []time.Duration) []result {
	added := median(viaPreview) - median(direct)
	preview, straight, relayed := median(bigPreview), median(bigDirect), median(bigRelayed)
	r := ratio(preview, straight)
	download := ratioTerm(r, "direct").with(r >= 0.5, "≥ 0.5×")
	if r < 0.5 && ratio(relayed, straight) < 0.5 {
		download.Target.Note = "as by the bare relay itself"
	}
	return []result{
		{ID: "j/get", Topic: topicPreview,
			What:  "`GET /` of Python's `http.server` (keep-alive) in a runc sandbox of network mode `none`, through its preview by path",
			Hutch: durationFig("", median(viaPreview)), Peers: []figure{durationFig("the same server on the host's loopback", median(direct))},
			Ratio: []term{deltaTerm(added, "").with(added <= time.Millisecond, "≤ 1 ms")}},
		{ID: "j/download", Topic: topicPreview, What: "one 256 MiB download through the preview",
			Hutch: rateFig("", preview),
			Peers: []figure{
				rateFig("straight from the host's server", straight),
				rateFig("through a bare relay on the host (one spliced hop, no sandbox)", relayed),
			},
			Ratio: []term{download, ratioTerm(ratio(preview, relayed), "the bare relay")}},
		{ID: "j/wake", Topic: topicPreview,
			What:  "wake on request: the sandbox suspended (runc) → the first preview request's whole answer (resume, the server started again, the wait for its port, the request)",
			Hutch: durationFig("", median(wake))},
	}
}

// suspendIdle suspends sandbox id once no request holds it: the one
// answered last may still hold it for a moment after its last byte.
func suspendIdle(ctx context.Context, c *client.Client, id string) error {
	for deadline := time.Now().Add(2 * time.Second); ; {
		_, err := c.SuspendSandbox(ctx, id)
		if !client.IsConflict(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fetch GETs url with key and reads its whole answer, which must be 200.
func fetch(ctx context.Context, hc *http.Client, url, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// waitAnswer tries get every 5 ms until it works, for up to 30 s.
func waitAnswer(ctx context.Context, get func(context.Context) (time.Duration, error)) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := get(ctx)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// bareRelay relays each connection to it to the host's server, spliced.
type bareRelay struct {
	ln   net.Listener
	url  string
	done chan struct{}
}

func newBareRelay(target string) (*bareRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &bareRelay{ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	to := strings.TrimPrefix(target, "http://")
	go func() {
		defer close(r.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				up, err := net.Dial("tcp", to)
				if err != nil {
					_ = c.Close()
					return
				}
				egress.Splice(context.Background(), c, up, nil)
			})
		}
	}()
	return r, nil
}

// close stops the relay once its connections have ended (the client's
// idle ones are closed first).
func (r *bareRelay) close() {
	_ = r.ln.Close()
	<-r.done
}

// hostServer is the preview server's twin, run on the host's loopback.
type hostServer struct {
	cmd *exec.Cmd
	url string
}

// startHostServer runs script on a free loopback port and returns once it
// answers.
func startHostServer(ctx context.Context, script string) (*hostServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	// #nosec G204 -- python3 and the bench's own script
	cmd := exec.Command("python3", script, port)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the host's server (python3): %w", err)
	}
	s := &hostServer{cmd: cmd, url: "http://" + addr}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	err = waitAnswer(ctx, func(ctx context.Context) (time.Duration, error) { return 0, fetch(ctx, hc, s.url+"/", "") })
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("the host's server: %w", err)
	}
	return s, nil
}

func (s *hostServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
