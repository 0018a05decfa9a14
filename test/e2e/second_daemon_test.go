package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestSecondDaemonStarts: two daemons on data dirs of their own, each
// given --listen but neither --e2b-listen, both start (issue 37). The E2B
// front is 127.0.0.1:49983 for the default data dir only; on any other it
// is a free port, and hutch e2b env names the one bound, which answers as
// the front does.
func TestSecondDaemonStarts(t *testing.T) {
	t.Parallel()
	var daemons []*daemon
	for range 2 {
		d := newDaemon(t, "--pool", "host=0")
		d.derivedRunDir = true
		startWithDefaultFront(d)
		daemons = append(daemons, d)
	}
	fronts := map[string]bool{}
	for _, d := range daemons {
		if _, err := d.client.Health(t.Context()); err != nil {
			t.Fatalf("health: %v", err)
		}

		stdout, stderr, code := d.cli("", "e2b", "env")
		if code != 0 {
			t.Fatalf("hutch e2b env: exit %d: %s", code, stderr)
		}
		env := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			env[k] = v
		}
		front, err := url.Parse(env["E2B_SANDBOX_URL"])
		if err != nil || front.Hostname() != "127.0.0.1" || front.Port() == "" || front.Port() == "0" || front.Port() == "49983" {
			t.Fatalf("E2B_SANDBOX_URL %q: want 127.0.0.1 and a port picked for this daemon", env["E2B_SANDBOX_URL"])
		}
		if want := "localhost:" + front.Port(); env["E2B_DOMAIN"] != want {
			t.Errorf("E2B_DOMAIN %q, want %q, the front's port", env["E2B_DOMAIN"], want)
		}
		if fronts[front.Host] {
			t.Errorf("both daemons name the front %s", front.Host)
		}
		fronts[front.Host] = true

		// A call naming no sandbox is refused by the front itself, which
		// says how to name one on its own domain.
		res, err := http.Get(front.String() + "/health")
		if err != nil {
			t.Fatalf("the front %s does not answer: %v", front, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "name the sandbox") || !strings.Contains(string(body), env["E2B_DOMAIN"]) {
			t.Errorf("GET %s/health: %d %s; want the front's 400 naming %s", front, res.StatusCode, body, env["E2B_DOMAIN"])
		}
	}
}

// startWithDefaultFront is d.start without --e2b-listen, so that the
// daemon takes the front's address hutch serve derives from its data dir.
// It fails the test, showing the log, when the daemon does not come up.
func startWithDefaultFront(d *daemon) {
	t := d.t
	t.Helper()
	// up reports whether the daemon answers on d.addr with its key within
	// a while, and false at once when its log says an address is in use.
	up := func(logStart int64) bool {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if logSince(d.logPath, logStart, "address already in use") {
				return false
			}
			b, err := os.ReadFile(filepath.Join(d.dataDir, "api.key"))
			if err != nil {
				continue
			}
			key := strings.TrimSpace(string(b))
			c, err := client.New("http://"+d.addr, key)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Health(ctx)
			cancel()
			if err == nil {
				d.key, d.client = key, c
				return true
			}
		}
		return false
	}
	for tries := 1; ; tries++ {
		logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		logStart, err := logf.Seek(0, io.SeekEnd)
		if err != nil {
			t.Fatal(err)
		}
		cmd := d.serveCommand()
		i := slices.Index(cmd.Args, "--e2b-listen")
		if i < 0 {
			t.Fatalf("the harness no longer gives --e2b-listen: %v", cmd.Args)
		}
		cmd.Args = slices.Delete(cmd.Args, i, i+2)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		if up(logStart) {
			d.cmd = cmd // stopped and checked at cleanup
			return
		}
		_ = cmd.Process.Kill() // it is ending, if not already gone
		_ = cmd.Wait()
		// Only --listen's port, found free by freeAddr, may have been
		// taken meanwhile by a test beside this one.
		if tries == 3 || !logSince(d.logPath, logStart, "listen on "+d.addr+": ") {
			b, _ := os.ReadFile(d.logPath)
			t.Fatalf("daemon did not come up; log:\n%s", b[logStart:])
		}
		d.addr = freeAddr(t)
	}
}
