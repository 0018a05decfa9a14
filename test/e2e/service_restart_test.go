package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A service whose command does not exec runs under /bin/sh -c, its server
// a child of the shell: a restart ends the shell and the server both, so
// the new server gets the port and serves the edited code; a stop and a
// delete leave nothing of its tree either. Under both runtimes.
func TestServiceRestartEndsTheOldTree(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		// A server that answers the version it read when it started, as
		// code is loaded at start.
		if res := d.exec(sb.ID, `echo v1 > version.txt && cat > server.py <<'EOF'
import http.server
version = open("version.txt").read().strip().encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(version)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
EOF`); res.ExitCode != 0 {
			t.Fatalf("write the server: %+v", res)
		}
		get := func() string {
			t.Helper()
			return d.exec(sb.ID, "curl -s --max-time 1 http://127.0.0.1:8000/").Stdout
		}
		// servers counts the processes of the service's tree: the servers
		// (python3 server.py) and the shells that run them.
		servers := func() (python, shells string) {
			t.Helper()
			count := func(cmdline string) string {
				res := d.exec(sb.ID, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -cxF '`+cmdline+`'`)
				return strings.TrimSpace(res.Stdout)
			}
			return count("python3 server.py "), count("/bin/sh -c python3 server.py ")
		}

		if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: "python3 server.py", Port: 8000}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		if got := get(); got != "v1" {
			t.Fatalf("the server answers %q, not v1", got)
		}

		d.exec(sb.ID, "echo v2 > version.txt")
		if _, err := d.client.RestartService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		// The old server, were it left running, would hold the port and
		// answer v1 for ever; the new one may take seconds to start on a
		// loaded machine, so the wait is generous.
		restarted := time.Now()
		got := get()
		for got != "v2" && time.Since(restarted) < 20*time.Second {
			time.Sleep(100 * time.Millisecond)
			got = get()
		}
		if got != "v2" {
			svc, err := d.client.GetService(ctx, sb.ID, "web")
			t.Fatalf("20 s after the restart the server answers %q, not v2; the service: %+v, %v", got, svc, err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		if python, shells := servers(); python != "1" || shells != "1" {
			t.Errorf("after the restart %s servers and %s shells run, not one of each", python, shells)
		}

		if svc, err := d.client.StopService(ctx, sb.ID, "web"); err != nil || svc.Status != client.ServiceStopped {
			t.Fatalf("stop: %+v, %v", svc, err)
		}
		if python, shells := servers(); python != "0" || shells != "0" {
			t.Errorf("after the stop %s servers and %s shells run", python, shells)
		}

		if _, err := d.client.RestartService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
		if err := d.client.DeleteService(ctx, sb.ID, "web"); err != nil {
			t.Fatal(err)
		}
		if python, shells := servers(); python != "0" || shells != "0" {
			t.Errorf("after the delete %s servers and %s shells run", python, shells)
		}
	})
}
