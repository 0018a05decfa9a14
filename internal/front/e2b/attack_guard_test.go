package e2b

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/files"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/core/template"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
	"github.com/hutchdev/hutch/internal/trust/audit"
)

// Attacks on what the front adds to Hutch's API's guarantees (finding
// 16): tokens that outlive the key that was given them, calls that leave
// no trace, and calls without bound. The front and the control plane are
// wired as the daemon wires them, over Hutch's API with its keys and
// audit log, on SQLite and the fake backend.

// stackTest is the control plane (over Hutch's API) and the front, over
// one Manager.
type stackTest struct {
	cpURL, frontURL string
	keys            *apikeys.Service
	audit           *audit.Log
}

// newStackTest starts a stackTest whose front allows rate calls a second
// per key (0: any number), in bursts of burst.
func newStackTest(t *testing.T, rate float64, burst int) *stackTest {
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
	quotas := quota.New(quota.Config{Store: db})
	nets := network.New(network.Config{Store: db})
	procs := processes.New(db, nil)
	m, err := core.New(t.Context(), core.Config{Store: db, Backends: []backend.Backend{fake.New(fake.TempDir(t))}, Default: fake.Name, Templates: templateStore, Hooks: []hook.Hook{quotas, nets, procs}})
	if err != nil {
		t.Fatal(err)
	}
	keys, auditLog, redactor := apikeys.New(db, nil), audit.New(db, nil), &redact.Redactor{}
	srv := api.New(api.Config{
		Manager: m, Exec: exec.New(m, procs, db, nil), Files: files.New(m), Keys: keys, Audit: auditLog, Workspaces: quotas, Networks: nets, Redactor: redactor,
		Templates: template.New(template.Config{Core: m, Store: db, Templates: templateStore, Quotas: quotas}),
		APIKey:    attackDaemonKey, Version: "test",
	})
	cp := httptest.NewServer(NewControlPlane(ControlPlaneConfig{API: srv.Handler(true), DaemonKey: attackDaemonKey, Keys: keys, Domain: "localhost:49983"}))
	front := httptest.NewServer(NewFront(FrontConfig{
		Manager: m, Previews: preview.New(preview.Config{Acquire: preview.Core(m)}),
		Interpreter: codeOf{NewInterpreter(&fakeCodeContexts{}, redactor, nil)}, Redactor: redactor,
		DaemonKey: attackDaemonKey, Keys: keys, Audit: auditLog, Rate: rate, Burst: burst, Domain: "localhost:49983",
	}))
	st := &stackTest{cpURL: cp.URL, frontURL: front.URL, keys: keys, audit: auditLog}
	t.Cleanup(func() {
		front.Close()
		cp.Close()
		auditLog.Close()
		m.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// key makes a key of workspace ws and returns it in E2B's shape.
func (st *stackTest) key(t *testing.T, name, ws string) string {
	t.Helper()
	key, _, err := st.keys.Create(t.Context(), apikeys.CreateRequest{Name: name, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return E2BKey(key)
}

// controlPlane calls E2B's control plane with key and decodes its answer
// into out.
func (st *stackTest) controlPlane(t *testing.T, key, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, st.cpURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return res.StatusCode
}

// create makes a sandbox through the control plane with key, as the SDK
// does (public traffic), and returns what it answered.
func (st *stackTest) create(t *testing.T, key string) sandboxInfo {
	t.Helper()
	var sb sandboxInfo
	if status := st.controlPlane(t, key, http.MethodPost, "/sandboxes", `{"templateID":"base","timeout":300}`, &sb); status != http.StatusCreated {
		t.Fatalf("create: %d", status)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, st.cpURL+"/sandboxes/"+sb.SandboxID, nil)
		req.Header.Set("X-API-KEY", E2BKey(attackDaemonKey))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Errorf("delete %s: %d", sb.SandboxID, res.StatusCode)
		}
	})
	return sb
}

// call sends a request to the front and returns its answer.
func (st *stackTest) call(t *testing.T, method, target string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, st.frontURL+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// envd is the headers of a call of sb's envd with token ("": none).
func envd(id, token string) map[string]string {
	h := map[string]string{headerSandboxID: id, headerSandboxPort: strconv.Itoa(EnvdPort)}
	if token != "" {
		h[headerAccessToken] = token
	}
	return h
}

// Finding 16: a sandbox's tokens, and the /files URLs signed with them,
// stop working within about a second of the deletion of the key they were
// given to; a key made again under the same name does not bring them
// back, and gets tokens of its own.
func TestAttackE2BTokenOutlivesKey(t *testing.T) {
	t.Parallel()
	st := newStackTest(t, 0, 0)
	alice := st.key(t, "alice", "acme")
	sb := st.create(t, alice)
	token := sb.EnvdAccessToken
	if status, _, body := st.call(t, http.MethodPost, "/files?path=note.txt&username=user", map[string]string{
		headerSandboxID: sb.SandboxID, headerAccessToken: token, "Content-Type": "application/octet-stream",
	}, "hello"); status != http.StatusOK {
		t.Fatalf("a write with the key's token: %d %q", status, body)
	}
	sig := signFiles(token, "note.txt", "read", "user", "")
	works := map[string]func() (int, string){
		"the access token": func() (int, string) {
			s, _, b := st.call(t, http.MethodGet, "/files?path=note.txt&username=user", envd(sb.SandboxID, token), "")
			return s, b
		},
		"an envd call with the access token": func() (int, string) {
			h := envd(sb.SandboxID, token)
			h["Content-Type"] = "application/json"
			s, _, b := st.call(t, http.MethodPost, "/process.Process/List", h, "{}")
			return s, b
		},
		"a signed URL naming its sandbox": func() (int, string) {
			s, _, b := st.call(t, http.MethodGet, "/files?path=note.txt&username=user&signature="+sig, envd(sb.SandboxID, ""), "")
			return s, b
		},
		"a signed URL as the SDK's, naming none": func() (int, string) {
			s, _, b := st.call(t, http.MethodGet, "/files?path=note.txt&username=user&signature="+sig, nil, "")
			return s, b
		},
	}
	for name, call := range works {
		if status, body := call(); status != http.StatusOK {
			t.Fatalf("%s, while its key lives: %d %q", name, status, body)
		}
	}
	if err := st.keys.Delete(t.Context(), "", "alice"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	for name, call := range works {
		for {
			status, body := call()
			if status != http.StatusOK && status != http.StatusTooManyRequests {
				t.Logf("%s stopped %v after its key was deleted: %d", name, time.Since(deleted).Round(time.Millisecond), status)
				break
			}
			if time.Since(deleted) > 1500*time.Millisecond {
				t.Errorf("%s still works %v after its key was deleted: %d %q", name, time.Since(deleted).Round(time.Millisecond), status, body)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The key made again, under its name and in its workspace: the old
	// tokens stay dead, and its own work.
	again := st.key(t, "alice", "acme")
	time.Sleep(keyringTTL + 100*time.Millisecond)
	for name, call := range works {
		if status, body := call(); status == http.StatusOK {
			t.Errorf("%s works again with a new key of the same name: %d %q", name, status, body)
		}
	}
	var info sandboxInfo
	if status := st.controlPlane(t, again, http.MethodPost, "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":300}`, &info); status != http.StatusOK {
		t.Fatalf("connect with the new key: %d", status)
	}
	if info.EnvdAccessToken == token {
		t.Error("the new key was given the old key's token")
	}
	if status, _, body := st.call(t, http.MethodGet, "/files?path=note.txt&username=user", envd(sb.SandboxID, info.EnvdAccessToken), ""); status != http.StatusOK || body != "hello" {
		t.Errorf("the new key's token: %d %q", status, body)
	}
	// A key of another workspace is given nothing, and the daemon's own
	// key's tokens work on.
	if status := st.controlPlane(t, st.key(t, "mallory", "other"), http.MethodPost, "/sandboxes/"+sb.SandboxID+"/connect", `{}`, &info); status != http.StatusNotFound {
		t.Errorf("connect with another workspace's key: %d", status)
	}
	if status := st.controlPlane(t, E2BKey(attackDaemonKey), http.MethodPost, "/sandboxes/"+sb.SandboxID+"/connect", `{}`, &info); status != http.StatusOK {
		t.Fatalf("connect with the daemon's key: %d", status)
	}
	if status, _, body := st.call(t, http.MethodGet, "/files?path=note.txt&username=user", envd(sb.SandboxID, info.EnvdAccessToken), ""); status != http.StatusOK {
		t.Errorf("the daemon's key's token: %d %q", status, body)
	}
}

// Finding 16: every call of envd's and the code interpreter's that acts
// is in the audit log, with the key its token was given to, the sandbox's
// workspace, the route and the status; health checks, listings and other
// ports are not.
func TestAttackE2BFrontAudited(t *testing.T) {
	t.Parallel()
	st := newStackTest(t, 0, 0)
	alice := st.key(t, "alice", "acme")
	sb := st.create(t, alice)
	id, token := sb.SandboxID, sb.EnvdAccessToken
	with := func(port int, token string, contentType string) map[string]string {
		h := map[string]string{headerSandboxID: id, headerSandboxPort: strconv.Itoa(port), "Content-Type": contentType}
		if token != "" {
			h[headerAccessToken] = token
		}
		return h
	}
	sig := signFiles(token, "note.txt", "read", "user", "")
	type call struct {
		method, target string
		headers        map[string]string
		body           string
		key            string // the entry's; "-": none
		object         string
	}
	calls := []call{
		{http.MethodPost, "/files?path=note.txt&username=user", with(EnvdPort, token, "application/octet-stream"), "hello", "alice", id + " note.txt"},
		{http.MethodGet, "/files?path=note.txt&username=user", with(EnvdPort, token, ""), "", "alice", id + " note.txt"},
		{http.MethodGet, "/files?path=note.txt&username=user&signature=" + sig, with(EnvdPort, "", ""), "", "alice", id + " note.txt (signed)"},
		{http.MethodPost, "/filesystem.Filesystem/MakeDir", with(EnvdPort, token, "application/json"), `{"path":"/tmp/d"}`, "alice", id},
		{http.MethodPost, "/filesystem.Filesystem/Remove", with(EnvdPort, token, "application/json"), `{"path":"/tmp/d"}`, "alice", id},
		{http.MethodPost, "/process.Process/SendSignal", with(EnvdPort, token, "application/json"), `{"process":{"tag":"no-such-process"},"signal":"SIGNAL_SIGTERM"}`, "alice", id},
		{http.MethodPost, "/execute", with(InterpreterPort, token, "application/json"), `{"code":"print(1)"}`, "alice", id},
		{http.MethodPost, "/contexts", with(InterpreterPort, "", "application/json"), `{"language":"python"}`, auditAnyone, id},
		{http.MethodDelete, "/contexts/ctx-1", with(InterpreterPort, token, ""), "", "alice", id + " ctx-1"},
		{http.MethodPost, "/execute", with(InterpreterPort, "", "application/json"), `{"code":"print(1)"}`, "-", ""}, // no token: no key's call
		{http.MethodPost, "/filesystem.Filesystem/Remove", with(EnvdPort, "0123", "application/json"), `{"path":"/tmp"}`, "-", ""},
		{http.MethodGet, "/health", with(EnvdPort, "", ""), "", "-", ""},
		{http.MethodGet, "/health", with(InterpreterPort, "", ""), "", "-", ""},
		{http.MethodGet, "/contexts", with(InterpreterPort, token, ""), "", "-", ""},
		{http.MethodPost, "/process.Process/List", with(EnvdPort, token, "application/json"), "{}", "-", ""},
		{http.MethodGet, "/", with(3000, "", ""), "", "-", ""},
	}
	statuses := map[string]int{}
	for _, c := range calls {
		status, _, body := st.call(t, c.method, c.target, c.headers, c.body)
		statuses[c.method+" "+c.target+" "+c.key] = status
		t.Logf("%s %s: %d %.120q", c.method, c.target, status, body)
	}
	entries, err := st.audit.List(t.Context(), audit.Filter{Workspace: "acme", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	left := map[int]bool{}
	for i := range entries {
		left[i] = true
	}
	for _, c := range calls {
		path, _, _ := strings.Cut(c.target, "?")
		action := auditAction + c.method + " " + path
		found := false
		for i, e := range entries {
			if left[i] && e.Action == action && e.Key == c.key && e.Object == c.object {
				delete(left, i)
				found = true
				if e.Workspace != "acme" || e.Status != statuses[c.method+" "+c.target+" "+c.key] {
					t.Errorf("%s by %s: recorded as %+v, want workspace acme, status %d", action, c.key, e, statuses[c.method+" "+c.target+" "+c.key])
				}
				break
			}
		}
		if want := c.key != "-"; found != want {
			t.Errorf("%s %s (port %s): recorded %v, want %v", c.method, c.target, c.headers[headerSandboxPort], found, want)
		}
	}
	for i := range left {
		if strings.HasPrefix(entries[i].Action, auditAction) {
			t.Errorf("an entry of no call of the front's that acts: %+v", entries[i])
		}
	}
}

// Finding 16: the front's calls are bounded per key, as the API's are,
// and those that carry no token per sandbox: past the burst, 429 in E2B's
// shape with Retry-After, another key's calls going on.
func TestAttackE2BFrontRateLimited(t *testing.T) {
	t.Parallel()
	const burst = 5
	st := newStackTest(t, 0.5, burst)
	alice, bob := st.key(t, "alice", "acme"), st.key(t, "bob", "acme")
	a1, a2 := st.create(t, alice), st.create(t, alice)
	var b1 sandboxInfo
	if status := st.controlPlane(t, bob, http.MethodPost, "/sandboxes/"+a1.SandboxID+"/connect", `{}`, &b1); status != http.StatusOK {
		t.Fatalf("connect with bob's key: %d", status)
	}
	list := func(sb sandboxInfo, token string) (int, http.Header, string) {
		h := envd(sb.SandboxID, token)
		h["Content-Type"] = "application/json"
		return st.call(t, http.MethodPost, "/process.Process/List", h, "{}")
	}
	for i := range burst {
		sb := []sandboxInfo{a1, a2}[i%2] // one key's rate, whichever sandbox
		if status, _, body := list(sb, sb.EnvdAccessToken); status != http.StatusOK {
			t.Fatalf("call %d within the burst: %d %q", i+1, status, body)
		}
	}
	status, h, body := list(a2, a2.EnvdAccessToken)
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &e); status != http.StatusTooManyRequests || err != nil || e.Code != http.StatusTooManyRequests || e.Message == "" {
		t.Errorf("a call past the key's burst: %d %q, want 429 in E2B's shape", status, body)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", h.Get("Retry-After"))
	}
	if status, _, body := list(a1, b1.EnvdAccessToken); status != http.StatusOK {
		t.Errorf("another key's call: %d %q", status, body)
	}
	// Calls that carry no token (an open route of a sandbox with public
	// traffic) are bounded per sandbox, and so is the search of a signed
	// URL that names none, per address.
	limited := func(name string, call func() int) {
		t.Helper()
		for i := range burst + 1 {
			if status := call(); status == http.StatusTooManyRequests {
				if i < burst {
					t.Errorf("%s: 429 at call %d, within the burst", name, i+1)
				}
				return
			}
		}
		t.Errorf("%s: no 429 past the burst", name)
	}
	limited("health checks of one sandbox", func() int {
		s, _, _ := st.call(t, http.MethodGet, "/health", envd(a2.SandboxID, ""), "")
		return s
	})
	limited("health checks of a sandbox that does not exist, as of one that does", func() int {
		s, _, _ := st.call(t, http.MethodGet, "/health", envd("nosuchsandbox", ""), "")
		return s
	})
	limited("searches of signed URLs that name no sandbox", func() int {
		s, _, _ := st.call(t, http.MethodGet, "/files?path=x&username=user&signature="+signFiles("nope", "x", "read", "user", ""), nil, "")
		return s
	})
	for i := range burst + 2 { // other ports are the sandbox's own traffic: not bounded here
		if s, _, _ := st.call(t, http.MethodGet, "/", map[string]string{headerSandboxID: a2.SandboxID, headerSandboxPort: "3000"}, ""); s == http.StatusTooManyRequests {
			t.Errorf("a preview's call %d: 429", i+1)
		}
	}
}
