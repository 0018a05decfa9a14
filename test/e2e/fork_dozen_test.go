package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A fork of 20 copies of a running gVisor sandbox: every copy answers,
// with a hostname of its own, its service reached through its own preview
// (its own network, behind its own router) and going on from the
// source's memory (its count of requests); each copy's disk holds its own
// writes only (the files it came with are the snapshot's, shared).
func TestForkTwenty(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	d := startDaemon(t)
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Runtime: "gvisor"})
	if res := d.exec(sb.ID, `head -c 50M /dev/urandom > big && cat > /tmp/web.py <<'EOF'
import http.server, socket
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        self.send_response(200); self.end_headers()
        self.wfile.write(("%s %d" % (socket.gethostname(), n)).encode())
    def log_message(self, *args):
        pass
http.server.HTTPServer(("0.0.0.0", 8000), H).serve_forever()
EOF
sync`); res.ExitCode != 0 {
		t.Fatalf("write the files: %+v", res)
	}
	if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{Name: "web", Command: "python3 /tmp/web.py", Port: 8000}); err != nil {
		t.Fatal(err)
	}
	web := waitStatus(t, d, sb.ID, "web", client.ServiceRunning)
	for i := range 5 {
		if status, _, body := previewGet(t, d, web.PathURL, ""); status != http.StatusOK || !strings.HasSuffix(body, " "+strconv.Itoa(i+1)) {
			t.Fatalf("the source's service: %d %q", status, body)
		}
	}
	began := time.Now()
	res, err := d.client.Fork(ctx, sb.ID, 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork × 20 of a gVisor sandbox: %v", time.Since(began).Round(time.Millisecond))
	for _, f := range res.Sandboxes {
		d.sandboxIDs = append(d.sandboxIDs, f.ID)
	}
	if len(res.Sandboxes) != 20 || len(res.Errors) != 0 {
		t.Fatalf("fork × 20 made %d, failed %+v", len(res.Sandboxes), res.Errors)
	}
	hosts := map[string]bool{}
	for _, f := range res.Sandboxes {
		svc, err := d.client.GetService(ctx, f.ID, "web")
		if err != nil {
			t.Errorf("copy %s's service: %v", f.ID, err)
			continue
		}
		status, _, body := previewGet(t, d, svc.PathURL, "")
		host, count, _ := strings.Cut(body, " ")
		hosts[host] = true
		if n, _ := strconv.Atoi(count); status != http.StatusOK || n < 6 {
			t.Errorf("copy %s answers %d %q: want its hostname and a count going on from the source's 5", f.ID, status, body)
		}
		if got := strings.TrimSpace(d.exec(f.ID, "hostname").Stdout); got != host {
			t.Errorf("copy %s is %q, its service says %q", f.ID, got, host)
		}
		st, err := d.client.Stats(ctx, f.ID)
		if err != nil {
			t.Error(err)
		} else if st.DiskUsedBytes > 40<<20 {
			t.Errorf("copy %s's disk holds %d MiB: more than its own writes (the source's 50 MB are the snapshot's)", f.ID, st.DiskUsedBytes>>20)
		}
	}
	if len(hosts) != 20 {
		t.Errorf("20 copies answer with %d hostnames: %v", len(hosts), hosts)
	}
	for _, f := range res.Sandboxes {
		if err := d.client.DeleteSandbox(ctx, f.ID); err != nil {
			t.Error(err)
		}
	}
}
