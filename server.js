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
	// The event stream's first event comes before its end.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.hostURL(5000, "/events"), nil)
	req.Header.Set("Authorization", "Bearer "+d.key)
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	line, err := bufio.NewReader(resp.Body).ReadString('\\n')
	first := time.Since(began)
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || line != "data: tick 0\\n" || first > time.Since(began)-300*time.Millisecond || !strings.Contains(string(rest), "tick 2") {
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

// download fetches a download URL, without the API key.''')
s=s.replace('''import (
	"bytes"''','''import (
	"bufio"
	"bytes"''')
s=s.replace('''	"strings"
	"testing"
''','''	"strings"
	"testing"
	"time"
''',1)
open(p,'w').write(s)
