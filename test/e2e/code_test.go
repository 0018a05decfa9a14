package e2e

import (
	"bufio"
	"bytes"
	"image/png"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestCodeContexts builds the python template as a user would, and runs
// code in contexts of it under each runtime: state kept between calls and
// apart between contexts, rich results (a matplotlib figure as PNG, a
// DataFrame as HTML), errors with their traceback, an endless loop
// interrupted at its timeout with the state kept, the files code wrote with
// URLs to download them, Deno and bash contexts, and the stream of events.
func TestCodeContexts(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)
	if out, stderr, code := d.cli("", "template", "build", "python"); code != 0 || !strings.HasPrefix(out, "python ") {
		t.Fatalf("template build python: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Template: "python", Runtime: runtime})
		newContext := func(language string) string {
			t.Helper()
			c, err := d.client.CreateContext(ctx, sb.ID, client.CreateContextRequest{Language: language})
			if err != nil {
				t.Fatalf("create a %s context: %v", language, err)
			}
			return c.ID
		}
		run := func(contextID, code string, timeoutS int64) *client.CodeExecution {
			t.Helper()
			res, err := d.client.RunInContext(ctx, sb.ID, client.CodeRequest{ContextID: contextID, Code: code, TimeoutS: timeoutS})
			if err != nil {
				t.Fatalf("run %q: %v", code, err)
			}
			return res
		}
		mainText := func(res *client.CodeExecution) string {
			if m := res.MainResult(); m != nil {
				return m.Text("text/plain")
			}
			return ""
		}

		py := newContext("python")
		run(py, "x = 41", 0)
		if res := run(py, "x + 1", 0); mainText(res) != "42" {
			t.Errorf("x + 1: %+v", res)
		}
		other := newContext("python")
		if res := run(other, "x", 0); res.Error == nil || res.Error.Name != "NameError" {
			t.Errorf("x in a second context: %+v", res)
		}

		// A figure, shown without asking for a backend, and saved: the
		// PNG decodes with the figure's size (400x300 at 100 dpi, and the
		// inline backend's tight box adds 0.1 in on each side), and the
		// saved file comes with a URL that downloads it.
		res := run(py, `import numpy as np, matplotlib.pyplot as plt
fig = plt.figure(figsize=(4, 3), dpi=100)
ax = fig.add_axes([0, 0, 1, 1])
ax.imshow(np.arange(1200).reshape(30, 40), aspect="auto")
ax.set_axis_off()
fig.savefig("plot.png")`, 0)
		var shown []byte
		for _, r := range res.Results {
			if img, err := r.Image("image/png"); err == nil && img != nil {
				shown = img
			}
		}
		if shown == nil {
			t.Errorf("no PNG in the results of a figure: %+v", res)
		} else if cfg, err := png.DecodeConfig(bytes.NewReader(shown)); err != nil || cfg.Width < 418 || cfg.Width > 422 || cfg.Height < 318 || cfg.Height > 322 {
			t.Errorf("the figure's PNG: %+v, %v; want about 420x320", cfg, err)
		}
		if len(res.Files) != 1 || !strings.HasSuffix(res.Files[0].Path, "/workspace/plot.png") || res.Files[0].DownloadURL == "" {
			t.Errorf("files written: %+v", res.Files)
		} else {
			body := download(t, res.Files[0].DownloadURL)
			if cfg, err := png.DecodeConfig(bytes.NewReader(body)); err != nil || cfg.Width != 400 || cfg.Height != 300 {
				t.Errorf("the saved plot: %+v, %v", cfg, err)
			}
		}

		res = run(py, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})", 0)
		if m := res.MainResult(); m == nil || !strings.Contains(m.Text("text/html"), "<table") {
			t.Errorf("a DataFrame: %+v", res)
		}
		res = run(py, "def f():\n    raise ValueError('boom')\nf()", 0)
		if res.Error == nil || res.Error.Name != "ValueError" || res.Error.Value != "boom" || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "f()") {
			t.Errorf("an exception: %+v", res.Error)
		}
		res = run(py, "while True: pass", 2)
		if !res.TimedOut || res.Restarted || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
			t.Errorf("an endless loop at its timeout: %+v %+v", res.CodeEnd, res.Error)
		}
		if res := run(py, "x", 0); mainText(res) != "41" {
			t.Errorf("x after the interrupt: %+v", res)
		}

		// Output streams as events, in order, then the end.
		var events []string
		end, err := d.client.RunInContextStream(ctx, sb.ID, client.CodeRequest{ContextID: py, Code: "print('a', flush=True)\nimport sys; print('b', file=sys.stderr, flush=True)\nx"}, func(ev client.CodeEvent) error {
			switch {
			case ev.Stdout != "":
				events = append(events, "stdout:"+ev.Stdout)
			case ev.Stderr != "":
				events = append(events, "stderr:"+ev.Stderr)
			case ev.Result != nil:
				events = append(events, "result:"+ev.Result.Text("text/plain"))
			}
			return nil
		})
		if want := []string{"stdout:a\n", "stderr:b\n", "result:41"}; err != nil || strings.Join(events, "|") != strings.Join(want, "|") || end.ExecutionCount == 0 {
			t.Errorf("the stream: %q, %+v, %v; want %q", events, end, err, want)
		}

		ts := newContext("typescript")
		run(ts, "let y: number = 41;", 0)
		if res := run(ts, "y + 1", 0); mainText(res) != "42" {
			t.Errorf("y + 1 in Deno: %+v", res)
		}
		sh := newContext("bash")
		run(sh, "z=5; cd /tmp", 0)
		if res := run(sh, "echo $z $PWD", 0); res.Stdout != "5 /tmp\n" {
			t.Errorf("bash's state: %+v", res)
		}

		list, err := d.client.ListContexts(ctx, sb.ID)
		if err != nil || len(list) != 4 {
			t.Errorf("contexts: %+v, %v", list, err)
		}
		if _, err := d.client.RestartContext(ctx, sb.ID, py); err != nil {
			t.Fatal(err)
		}
		if res := run(py, "x", 0); res.Error == nil || res.Error.Name != "NameError" {
			t.Errorf("x after a restart: %+v", res)
		}
		for _, c := range list {
			if err := d.client.DeleteContext(ctx, sb.ID, c.ID); err != nil {
				t.Error(err)
			}
		}
		if _, err := d.client.RunInContext(ctx, sb.ID, client.CodeRequest{ContextID: py, Code: "1"}); !client.IsNotFound(err) {
			t.Errorf("run in a deleted context: %v", err)
		}
		if _, err := d.client.CreateContext(ctx, sb.ID, client.CreateContextRequest{Language: "cobol"}); !client.IsInvalidArgument(err) {
			t.Errorf("an unknown language: %v", err)
		}

		webApps(t, d, sb.ID)

		// A suspend keeps contexts where it keeps processes: under gVisor
		// (memory and processes kept) y is there after the resume; under
		// runc the kernel ended with the processes, which not_found says.
		kept := newContext("python")
		run(kept, "y = 7", 0)
		suspendIdle(t, d, sb.ID)
		res, err = d.client.RunInContext(ctx, sb.ID, client.CodeRequest{ContextID: kept, Code: "y"})
		switch {
		case runtime == "gvisor" && (err != nil || mainText(res) != "7"):
			t.Errorf("y after a suspend with memory: %+v, %v", res, err)
		case runtime == "runc" && !client.IsNotFound(err):
			t.Errorf("a context after a suspend without memory: %+v, %v", res, err)
		}
	})
}

// webApps starts a Flask app (the python template has Flask) and a Node
// server as services of sandbox id, and reads them through their previews
// by host and by path: a page, an event stream as it comes, and a reload
// that picks up edited code.
func webApps(t *testing.T, d *daemon, id string) {
	t.Helper()
	ctx := t.Context()
	p := newPreviewer(t, d, id)
	if res := d.exec(id, `cat > app.py <<'EOF'
import time
from flask import Flask, Response
app = Flask(__name__)
@app.get("/")
def index():
    return "flask v1"
@app.get("/events")
def events():
    def gen():
        for i in range(3):
            yield f"data: tick {i}\n\n"
            time.sleep(0.3)
    return Response(gen(), mimetype="text/event-stream")
EOF
cat > server.js <<'EOF'
require("http").createServer((req, res) => res.end("node " + req.url)).listen(3000, "127.0.0.1");
EOF`); res.ExitCode != 0 {
		t.Fatalf("write the apps: %+v", res)
	}
	for _, req := range []client.StartServiceRequest{
		{Name: "flask", Command: "exec flask --app app run --port 5000", Port: 5000, Slot: "preview"},
		{Name: "node", Cmd: []string{"node", "server.js"}, Port: 3000},
	} {
		if _, err := d.client.StartService(ctx, id, req); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, id, req.Name, client.ServiceRunning)
	}
	for _, u := range []string{p.hostURL(5000, "/"), p.pathURL(5000, "/")} {
		if code, _, body := p.do(t, http.MethodGet, u, d.key, nil, nil); code != http.StatusOK || string(body) != "flask v1" {
			t.Errorf("GET %s: %d %q", u, code, body)
		}
	}
	for _, u := range []string{p.hostURL(3000, "/x?y=1"), p.pathURL(3000, "/x?y=1")} {
		if code, _, body := p.do(t, http.MethodGet, u, d.key, nil, nil); code != http.StatusOK || string(body) != "node /x?y=1" {
			t.Errorf("GET %s: %d %q", u, code, body)
		}
	}
	// The event stream's first event comes well before its end.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.hostURL(5000, "/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d.key)
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	first := time.Since(began)
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || line != "data: tick 0\n" || time.Since(began)-first < 300*time.Millisecond || !strings.Contains(string(rest), "tick 2") {
		t.Errorf("the event stream: %q (after %v), then %q", line, first, rest)
	}
	// A reload picks up edited code.
	d.exec(id, "sed -i 's/flask v1/flask v2/' app.py")
	if _, err := d.client.RestartService(ctx, id, "flask"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, id, "flask", client.ServiceRunning)
	if code, _, body := p.do(t, http.MethodGet, p.hostURL(5000, "/"), d.key, nil, nil); code != http.StatusOK || string(body) != "flask v2" {
		t.Errorf("after the reload: %d %q", code, body)
	}
}

// download fetches a download URL, without the API key.
func download(t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, body)
	}
	return body
}
