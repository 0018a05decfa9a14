package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// hutch create of a template being built waits for the build, saying how
// far it is, then creates; a create of a template that is not there and
// not being built fails at once.
func TestCreateWaitsForTemplateBuild(t *testing.T) {
	poll, report := buildPoll, buildReport
	buildPoll, buildReport = time.Millisecond, time.Hour
	t.Cleanup(func() { buildPoll, buildReport = poll, report })
	var polls, creates atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		building := polls.Load() < 3
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/health":
			polls.Add(1)
			h := client.Health{Status: "ok", Builds: []client.TemplateBuild{}}
			if building {
				h.Builds = append(h.Builds, client.TemplateBuild{Template: "base", Step: "download", Description: "step download 3/9 for 1m0s"})
			}
			writeJSON(w, http.StatusOK, h)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
			creates.Add(1)
			body, _ := io.ReadAll(r.Body)
			switch {
			case strings.Contains(string(body), `"nosuch"`):
				writeError(w, http.StatusNotFound, "not_found", "template nosuch not found")
				return
			case building:
				writeError(w, http.StatusServiceUnavailable, "unavailable", "template base is being built")
				return
			}
			writeJSON(w, http.StatusCreated, client.Sandbox{ID: "sb1"})
		}
	}))
	t.Cleanup(srv.Close)
	run := func(args ...string) result { return runAt(t, srv.URL, args...) }
	r := run("create", "--template", "base")
	if r.code != 0 || r.stdout != "sb1\n" || !strings.Contains(r.stderr, "template base is being built") || !strings.Contains(r.stderr, "download 3/9") {
		t.Errorf("create while base builds: exit %d, stdout %q, stderr %q; want it to wait, say so, then create", r.code, r.stdout, r.stderr)
	}
	if polls.Load() < 3 || creates.Load() != 2 {
		t.Errorf("%d looks at the build, %d creates; want it polled until done and one create after", polls.Load(), creates.Load())
	}
	if r := run("create", "--template", "nosuch"); r.code == 0 || strings.Contains(r.stderr, "being built") {
		t.Errorf("create of a missing template: exit %d, stderr %q; want a failure at once", r.code, r.stderr)
	}
}

// hutch run while the default runtime is being set up (./setup building
// runsc) waits for it, saying so, then runs; a runtime that is not usable
// for good fails at once.
func TestCreateWaitsForPendingRuntime(t *testing.T) {
	poll, report := buildPoll, buildReport
	buildPoll, buildReport = time.Millisecond, time.Hour
	t.Cleanup(func() { buildPoll, buildReport = poll, report })
	var polls, creates atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pending := polls.Load() < 3
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/health":
			polls.Add(1)
			h := client.Health{Status: "ok", DefaultRuntime: "gvisor", Builds: []client.TemplateBuild{}, Backends: []client.BackendHealth{
				{Name: "runc", Usable: true}, {Name: "gvisor", Usable: !pending, Pending: pending, Reason: "bin/runsc is being built (for 40s so far)"},
			}}
			writeJSON(w, http.StatusOK, h)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
			creates.Add(1)
			body, _ := io.ReadAll(r.Body)
			switch {
			case strings.Contains(string(body), `"runc"`):
				writeError(w, http.StatusServiceUnavailable, "unavailable", "the daemon is draining")
				return
			case pending:
				writeError(w, http.StatusServiceUnavailable, "unavailable", "runtime gvisor is not ready yet")
				return
			}
			writeJSON(w, http.StatusCreated, client.Sandbox{ID: "sb1"})
		}
	}))
	t.Cleanup(srv.Close)
	r := runAt(t, srv.URL, "create")
	if r.code != 0 || r.stdout != "sb1\n" || !strings.Contains(r.stderr, "runtime gvisor is being set up: bin/runsc is being built") {
		t.Errorf("create while runsc builds: exit %d, stdout %q, stderr %q; want it to wait, say so, then create", r.code, r.stdout, r.stderr)
	}
	if polls.Load() < 3 || creates.Load() != 2 {
		t.Errorf("%d looks at the runtime, %d creates; want it polled until ready and one create after", polls.Load(), creates.Load())
	}
	if r := runAt(t, srv.URL, "create", "--runtime", "runc"); r.code == 0 || strings.Contains(r.stderr, "being set up") {
		t.Errorf("create unavailable for another reason: exit %d, stderr %q; want a failure at once", r.code, r.stderr)
	}

	// hutch run bounds each create it sends (runCreateTimeout), not the
	// wait: runsc takes minutes to build on a fresh machine.
	polls.Store(0)
	buildPoll = 20 * time.Millisecond
	c, err := client.New(srv.URL, fakeKey)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{stdout: io.Discard, stderr: io.Discard}
	if sb, err := a.createSandbox(t.Context(), c, client.CreateSandboxRequest{}, 10*time.Millisecond); err != nil || sb.ID != "sb1" {
		t.Errorf("a wait longer than each attempt's bound: %v, %+v; want the sandbox", err, sb)
	}
}

// runAt runs the CLI with args against the daemon at url.
func runAt(t *testing.T, url string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		lookupEnv: func(string) (string, bool) { return "", false },
		newClient: func() (*client.Client, error) { return client.New(url, fakeKey) },
		now:       func() time.Time { return fakeNow },
	}
	code := a.run(t.Context(), args)
	return result{out.String(), errOut.String(), code}
}

// hutch health prints the runtimes, the pools and the builds under way.
func TestHealthCmd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, client.Health{
			Status: "ok", Version: "1.2.3", DefaultRuntime: "gvisor", DefaultReason: "usable",
			Backends: []client.BackendHealth{{Name: "runc", Version: "1.1", Usable: true}, {Name: "gvisor", Usable: false, Reason: "runsc not found"}, {Name: "other", Pending: true, Reason: "bin/other is being built"}},
			Pools:    []client.PoolHealth{{Template: "base", Runtime: "gvisor", Size: 2, Ready: 1}},
			Builds:   []client.TemplateBuild{{Template: "python", Description: "step install 21/100 for 1m17s"}},
		})
	}))
	t.Cleanup(srv.Close)
	r := runAt(t, srv.URL, "health")
	want := "hutch 1.2.3: ok; default runtime gvisor (usable)\n" +
		"runtime runc 1.1: usable\n" +
		"runtime gvisor: not usable: runsc not found\n" +
		"runtime other: being set up: bin/other is being built\n" +
		"pool base on gvisor: 1 of 2 ready\n" +
		"building python: step install 21/100 for 1m17s\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("hutch health: exit %d, stdout:\n%s\nstderr %q; want:\n%s", r.code, r.stdout, r.stderr, want)
	}
}
