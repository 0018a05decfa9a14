package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/checkpoints"
	"github.com/hutchdev/hutch/internal/core/events"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/files"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/core/template"
	"github.com/hutchdev/hutch/internal/core/toolrun"
	"github.com/hutchdev/hutch/internal/core/volume"
	"github.com/hutchdev/hutch/internal/core/webhooks"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
	"github.com/hutchdev/hutch/internal/trust/audit"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

// The API in process: the real handlers over a Manager on SQLite and the
// fake backend, behind httptest, reached through the Go SDK and plain
// HTTP. (test/e2e drives the whole binary with real runtimes.)

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const testKey = "hutch_test"

// testServer serves the API over a fresh Manager until the test ends.
type testServer struct {
	url       string
	client    *client.Client
	be        *fake.Backend
	templates *rootfs.Store
}

// newTestServer starts a testServer; configure changes its Config first.
func newTestServer(t *testing.T, configure ...func(*Config)) *testServer {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	templateStore, err := rootfs.Open(filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	be := fake.New(fake.TempDir(t))
	quotas := quota.New(quota.Config{Store: db})
	nets := network.New(network.Config{Store: db})
	volumeDir := t.TempDir()
	mounts := &volume.Mounts{Store: db, Dir: volumeDir}
	procs := processes.New(db, nil)
	eventLog := events.New(events.Config{Store: db, Poll: 50 * time.Millisecond})
	m, err := core.New(t.Context(), core.Config{Store: db, Backends: []backend.Backend{be}, Default: fake.Name, Templates: templateStore, Hooks: []hook.Hook{quotas, nets, procs, mounts, eventLog}})
	if err != nil {
		t.Fatal(err)
	}
	hooksOut, err := webhooks.New(webhooks.Config{Store: db, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	eventLog.Subscribe(hooksOut.Take)
	runCtx, stopRunning := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { _ = eventLog.Run(runCtx) })
	running.Go(func() { _ = hooksOut.Run(runCtx) })
	vault, err := secrets.Open(t.Context(), db, secrets.KeySource{File: filepath.Join(dir, "secrets.key"), Create: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	auditLog := audit.New(db, nil)
	redactor := &redact.Redactor{}
	vault.OnChange(func() {
		plains, _ := vault.Plaintexts(context.Background())
		var set []redact.Secret
		for _, p := range plains {
			set = append(set, redact.Secret{Name: p.Name, Value: p.Value})
		}
		redactor.Replace(set)
	})
	tools := toolrun.New(toolrun.Config{Sandboxes: m, Downloads: download.NewSigner("test"), PublicURL: "http://hutch.test/"})
	cfg := Config{
		Manager: m, Exec: exec.New(m, procs, db, nil), Files: files.New(m), Tools: tools,
		Templates: template.New(template.Config{Core: m, Store: db, Templates: templateStore, Quotas: quotas}), Checkpoints: checkpoints.New(checkpoints.Config{Core: m, Store: db, Templates: templateStore}), Volumes: volume.New(db, m, volumeDir, nil),
		Keys: apikeys.New(db, nil), Audit: auditLog, Workspaces: quotas, Networks: nets, Secrets: vault, Redactor: redactor,
		Events: eventLog, Webhooks: hooksOut, APIKey: testKey, Version: "test",
	}
	for _, f := range configure {
		f(&cfg)
	}
	srv := httptest.NewServer(New(cfg).Handler(true))
	t.Cleanup(func() {
		srv.Close()
		auditLog.Close()
		m.Close()
		stopRunning()
		running.Wait()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := client.New(srv.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{url: srv.URL, client: c, be: be, templates: templateStore}
}

// Bad input is refused with the error's status and stable code, a message
// a person can act on, and nothing made. None of it needs a sandbox.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		key        string
		wantStatus int
		wantCode   string
		wantText   string // in the message
	}{
		{"unknown sandbox", "GET", "/v1/sandboxes/nosuchbox", "", testKey, 404, "not_found", "nosuchbox"},
		{"exec in unknown sandbox", "POST", "/v1/sandboxes/nosuchbox/exec", `{"cmd":["true"]}`, testKey, 404, "not_found", "nosuchbox"},
		{"malformed JSON", "POST", "/v1/sandboxes", `{"cpus":`, testKey, 400, "invalid_argument", ""},
		{"unknown field", "POST", "/v1/sandboxes", `{"cpu":1}`, testKey, 400, "invalid_argument", "cpu"},
		{"bad limits, all said", "POST", "/v1/sandboxes", `{"memory_mb":1,"pids":1}`, testKey, 400, "invalid_argument", "pids must be"},
		{"bad disk", "POST", "/v1/sandboxes", `{"disk_mb":1}`, testKey, 400, "invalid_argument", "disk_mb"},
		{"bad idle action", "POST", "/v1/sandboxes", `{"idle_action":"nap"}`, testKey, 400, "invalid_argument", "idle_action"},
		{"bad idle timeout", "POST", "/v1/sandboxes", `{"idle_timeout_s":-5}`, testKey, 400, "invalid_argument", "idle_timeout_s"},
		{"bad env name", "POST", "/v1/sandboxes", `{"env":{"A=B":"c"}}`, testKey, 400, "invalid_argument", "env name"},
		{"file outside the workspace", "POST", "/v1/sandboxes", `{"files":{"/etc/passwd":"x"}}`, testKey, 400, "invalid_argument", "/etc/passwd"},
		{"unknown runtime", "POST", "/v1/sandboxes", `{"runtime":"kata"}`, testKey, 400, "invalid_argument", "runtime must be one of"},
		{"template and snapshot", "POST", "/v1/sandboxes", `{"template":"a","from_snapshot":"b"}`, testKey, 400, "invalid_argument", "not both"},
		{"unknown template", "POST", "/v1/sandboxes", `{"template":"nope"}`, testKey, 404, "not_found", "nope"},
		{"keepalive of an unknown sandbox", "PATCH", "/v1/sandboxes/nosuchbox", `{}`, testKey, 404, "not_found", "nosuchbox"},
		{"no such endpoint", "GET", "/v1/nothing", "", testKey, 404, "not_found", "no such endpoint"},
		{"missing key", "GET", "/v1/sandboxes", "", "", 401, "unauthenticated", ""},
		{"wrong key", "GET", "/v1/health", "", "hutch_wrong", 401, "unauthenticated", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequestWithContext(t.Context(), tt.method, s.url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.wantStatus || !strings.Contains(string(body), `"code":"`+tt.wantCode+`"`) ||
				!strings.Contains(string(body), `"message":"`) || !strings.Contains(string(body), tt.wantText) {
				t.Fatalf("got %d %s, want %d with code %s saying %q", res.StatusCode, body, tt.wantStatus, tt.wantCode, tt.wantText)
			}
		})
	}
	t.Cleanup(func() {
		if list, _ := s.client.ListSandboxes(t.Context()); len(list) != 0 {
			t.Errorf("bad calls left sandboxes: %+v", list)
		}
	})
}

// A sandbox's life through the API: create, exec, files, pause, suspend,
// resume, stop, start, keepalive, delete, each answer as the SDK reads it.
func TestLifecycleInProcess(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
	s := newTestServer(t)
	ctx := t.Context()
	sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Metadata: map[string]string{"owner": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != client.StateRunning || sb.Runtime != fake.Name || sb.Metadata["owner"] != "t" {
		t.Fatalf("created: %+v", sb)
	}
	// The fake's sandbox sees the host's file system: its workspace is
	// under its root there.
	workspace := filepath.Join(s.be.Root(sb.ID), rootfs.Workspace)
	res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "echo hi; exit 3", Cwd: workspace})
	if err != nil || res.ExitCode != 3 || res.Stdout != "hi\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	steps := []struct {
		name string
		do   func() (*client.Sandbox, error)
		want string
	}{
		{"pause", func() (*client.Sandbox, error) { return s.client.PauseSandbox(ctx, sb.ID) }, client.StatePaused},
		{"unpause", func() (*client.Sandbox, error) { return s.client.UnpauseSandbox(ctx, sb.ID) }, client.StateRunning},
		{"suspend", func() (*client.Sandbox, error) { return s.client.SuspendSandbox(ctx, sb.ID) }, client.StateSuspended},
		{"resume", func() (*client.Sandbox, error) { return s.client.ResumeSandbox(ctx, sb.ID) }, client.StateRunning},
		{"stop", func() (*client.Sandbox, error) { return s.client.StopSandbox(ctx, sb.ID) }, client.StateStopped},
		{"start", func() (*client.Sandbox, error) { return s.client.StartSandbox(ctx, sb.ID) }, client.StateRunning},
		{"keepalive", func() (*client.Sandbox, error) {
			return s.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{IdleTimeoutS: 3600})
		}, client.StateRunning},
	}
	for _, st := range steps {
		got, err := st.do()
		if err != nil || got.State != st.want {
			t.Fatalf("%s: %+v, %v; want %s", st.name, got, err, st.want)
		}
	}
	if got, _ := s.client.GetSandbox(ctx, sb.ID); got.IdleTimeoutS != 3600 {
		t.Errorf("after keepalive: idle timeout %d", got.IdleTimeoutS)
	}
	if err := s.client.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.GetSandbox(ctx, sb.ID); !client.IsNotFound(err) {
		t.Errorf("after delete: %v, want not_found", err)
	}
}
