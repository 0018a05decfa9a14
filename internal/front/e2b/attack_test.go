package e2b

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// Attacks on the E2B front (docs/security.md): what a caller without a
// sandbox's access token can make the front do, over a Manager on SQLite
// and the fake backend (whose agent is real), the code interpreter on
// fake contexts.

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const (
	attackDaemonKey = "hutch_attack"
	attackSecret    = "s3cr3t-VALUE-0123456789"
)

// frontTest is the front in front of a Manager of its own.
type frontTest struct {
	url    string
	m      *core.Manager
	code   *fakeCodeContexts
	tokens tokens
}

// codeOf serves every sandbox's code interpreter on the fake contexts'
// one sandbox.
type codeOf struct{ in *Interpreter }

func (c codeOf) ServeSandbox(w http.ResponseWriter, r *http.Request, _ string) {
	c.in.ServeSandbox(w, r, codeSandbox)
}

func newFrontTest(t *testing.T) *frontTest {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	templates, err := rootfs.Open(filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := core.New(t.Context(), core.Config{Store: db, Backends: []backend.Backend{fake.New(fake.TempDir(t))}, Default: fake.Name, Templates: templates})
	if err != nil {
		t.Fatal(err)
	}
	redactor := &redact.Redactor{}
	redactor.Replace([]redact.Secret{{Name: "API_TOKEN", Value: attackSecret}})
	code := &fakeCodeContexts{}
	front := NewFront(FrontConfig{
		Manager: m, Previews: preview.New(preview.Config{Acquire: preview.Core(m)}),
		Interpreter: codeOf{NewInterpreter(code, redactor, nil)}, Redactor: redactor,
		DaemonKey: attackDaemonKey, Domain: "localhost:49983",
	})
	srv := httptest.NewServer(front)
	t.Cleanup(func() {
		srv.Close()
		m.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return &frontTest{url: srv.URL, m: m, code: code, tokens: newTokens(attackDaemonKey)}
}

// sandbox makes a sandbox: through E2B's API (public traffic, as E2B's
// default) when e2b, else through Hutch's own.
func (ft *frontTest) sandbox(t *testing.T, e2b bool, files map[string]string) string {
	t.Helper()
	meta := map[string]string{}
	if e2b {
		meta[metaTemplate] = "base"
	}
	sb, _, err := ft.m.Create(t.Context(), create.Options{Metadata: meta, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ft.m.Delete(context.Background(), sb.ID); err != nil {
			t.Error(err)
		}
	})
	return sb.ID
}

// token is sandbox id's token of kind, as the daemon's own key is given
// it.
func (ft *frontTest) token(kind, id string) string { return ft.tokens.token(kind, id, holder{}) }

func (ft *frontTest) runs() int {
	ft.code.mu.Lock()
	defer ft.code.mu.Unlock()
	return len(ft.code.runs)
}

// raw sends a request as it is written, target unparsed (a client
// library would clean some spellings of it), and returns the answer.
func (ft *frontTest) raw(t *testing.T, method, target string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ft.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:49983\r\nConnection: close\r\n")
	for k, v := range headers {
		b.WriteString(k + ": " + v + "\r\n")
	}
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(out)
}

// Finding 3: every spelling of /execute but the SDK's own needs the
// access token, and none runs code without it; the check and the
// interpreter read one route from one path.
func TestAttackE2BExecutePathSpellings(t *testing.T) {
	t.Parallel()
	ft := newFrontTest(t)
	for _, e2b := range []bool{true, false} {
		id := ft.sandbox(t, e2b, nil)
		code := map[string]string{headerSandboxID: id, headerSandboxPort: strconv.Itoa(InterpreterPort), "Content-Type": "application/json"}
		withToken := map[string]string{headerAccessToken: ft.token("envd", id)}
		for k, v := range code {
			withToken[k] = v
		}
		for _, spelling := range []string{
			"/execute/", "//execute", "/./execute", "/execute/.", "/execute%2F", "/execute%2f", "/EXECUTE", "/Execute",
			"/contexts/../execute", "/contexts/x/../../execute", "/contexts/%2E%2E/execute", "/%65xecute", "/execute%00",
			"/execute;", "/execute\\", "///execute//", "/health/../execute", "/contexts/..%2Fexecute",
		} {
			before := ft.runs()
			status, _, body := ft.raw(t, http.MethodPost, spelling, code, `{"code":"print(6*7)"}`)
			if ft.runs() != before || status == http.StatusOK {
				t.Errorf("e2b=%v POST %s without the token: %d %q, code ran: %v", e2b, spelling, status, body, ft.runs() != before)
			}
			// With the token, still no second reading of the path.
			before = ft.runs()
			status, _, _ = ft.raw(t, http.MethodPost, spelling, withToken, `{"code":"print(6*7)"}`)
			if ft.runs() != before || status == http.StatusOK {
				t.Errorf("e2b=%v POST %s with the token: %d, code ran: %v", e2b, spelling, status, ft.runs() != before)
			}
		}
		// The SDK's own call: with the token only.
		before := ft.runs()
		if status, _, body := ft.raw(t, http.MethodPost, "/execute", code, `{"code":"print(6*7)"}`); status != http.StatusUnauthorized || ft.runs() != before {
			t.Errorf("e2b=%v POST /execute without the token: %d %q", e2b, status, body)
		}
		if status, _, body := ft.raw(t, http.MethodPost, "/execute", withToken, `{"code":"print(6*7)"}`); status != http.StatusOK || ft.runs() != before+1 {
			t.Errorf("e2b=%v POST /execute with the token: %d %q", e2b, status, body)
		}
		// The routes E2B leaves open, by their one spelling, and only for
		// a sandbox whose traffic is public.
		for _, call := range []struct{ method, target string }{
			{http.MethodGet, "/contexts"}, {http.MethodPost, "/contexts"}, {http.MethodGet, "/health"},
		} {
			status, _, body := ft.raw(t, call.method, call.target, code, "{}")
			if want := map[bool]int{true: http.StatusOK, false: http.StatusUnauthorized}[e2b]; status != want {
				t.Errorf("e2b=%v %s %s without the token: %d %q, want %d", e2b, call.method, call.target, status, body, want)
			}
		}
		for _, call := range []struct{ method, target string }{
			{http.MethodPut, "/contexts"}, {http.MethodGet, "/contexts/"}, {http.MethodPost, "/contexts/x/restart/"}, {http.MethodGet, "/execute"},
		} {
			if status, _, body := ft.raw(t, call.method, call.target, code, "{}"); status != http.StatusUnauthorized && status != http.StatusBadRequest {
				t.Errorf("e2b=%v %s %s without the token: %d %q, want it refused", e2b, call.method, call.target, status, body)
			}
		}
	}
}

// envd's side is read the same way: its open route /health and /files
// with a signature have one spelling each, and every other needs the
// token.
func TestAttackE2BEnvdPathSpellings(t *testing.T) {
	t.Parallel()
	ft := newFrontTest(t)
	id := ft.sandbox(t, true, map[string]string{"a.txt": "hello"})
	envd := map[string]string{headerSandboxID: id, headerSandboxPort: strconv.Itoa(EnvdPort)}
	sig := signFiles(ft.token("envd", id), "workspace/a.txt", "read", "user", "")
	for _, target := range []string{
		"/files/?path=workspace/a.txt&username=user&signature=" + sig, "//files?path=workspace/a.txt&username=user&signature=" + sig,
		"/./files?path=workspace/a.txt&username=user&signature=" + sig, "/files%2F?path=workspace/a.txt&username=user&signature=" + sig,
		"/health/../files?path=workspace/a.txt&username=user&signature=" + sig,
		"/health/", "//health", "/process.Process/../health", "/process.Process/List/", "//process.Process/List",
	} {
		status, _, body := ft.raw(t, http.MethodGet, target, envd, "")
		if status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %q, want 400", target, status, body)
		}
	}
	if status, _, body := ft.raw(t, http.MethodGet, "/files?path=workspace/a.txt&username=user&signature="+sig, envd, ""); status != http.StatusOK || body != "hello" {
		t.Errorf("a signed read: %d %q", status, body)
	}
	if status, _, body := ft.raw(t, http.MethodPost, "/process.Process/List", map[string]string{headerSandboxID: id, "Content-Type": "application/json"}, "{}"); status != http.StatusUnauthorized {
		t.Errorf("envd's RPC without the token: %d %q", status, body)
	}
}

// Finding 16: /health tells nothing of a sandbox to a caller who may not
// reach it: answered as for one that does not exist.
func TestAttackE2BHealthAnyID(t *testing.T) {
	t.Parallel()
	ft := newFrontTest(t)
	hutchMade, e2bMade := ft.sandbox(t, false, nil), ft.sandbox(t, true, nil)
	health := func(id string, headers map[string]string) (int, string) {
		h := map[string]string{headerSandboxID: id, headerSandboxPort: strconv.Itoa(EnvdPort)}
		for k, v := range headers {
			h[k] = v
		}
		status, _, body := ft.raw(t, http.MethodGet, "/health", h, "")
		return status, strings.ReplaceAll(body, id, "ID")
	}
	missingStatus, missingBody := health("nosuchsandbox", nil)
	if missingStatus != http.StatusBadGateway {
		t.Fatalf("a sandbox that does not exist: %d %q", missingStatus, missingBody)
	}
	if status, body := health(hutchMade, nil); status != missingStatus || body != missingBody {
		t.Errorf("a sandbox the caller may not reach: %d %q, want as for none: %d %q", status, body, missingStatus, missingBody)
	}
	if status, body := health(hutchMade, map[string]string{headerAccessToken: ft.token("envd", e2bMade)}); status != missingStatus || body != missingBody {
		t.Errorf("with another sandbox's token: %d %q, want as for none", status, body)
	}
	for name, headers := range map[string]map[string]string{
		"its access token":  {headerAccessToken: ft.token("envd", hutchMade)},
		"its traffic token": {headerTrafficToken: ft.token("traffic", hutchMade)},
	} {
		if status, body := health(hutchMade, headers); status != http.StatusNoContent {
			t.Errorf("with %s: %d %q", name, status, body)
		}
	}
	if status, body := health(e2bMade, nil); status != http.StatusNoContent {
		t.Errorf("a sandbox with public traffic: %d %q", status, body)
	}
}

// signFiles signs a /files URL as the SDK does.
func signFiles(token, path, op, user, exp string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != "" {
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	return url.QueryEscape("v1_" + base64.RawStdEncoding.EncodeToString(sum[:]))
}

// Finding 16: a signed /files URL is checked against the sandbox it
// names; the SDK's URLs that name none are looked for among the sandboxes
// made through E2B's API only, and never with a signature of the wrong
// shape or an expired one.
func TestAttackE2BSignedFilesBound(t *testing.T) {
	t.Parallel()
	ft := newFrontTest(t)
	hutchMade := ft.sandbox(t, false, map[string]string{"a.txt": "hutch's"})
	e2bMade := ft.sandbox(t, true, map[string]string{"a.txt": "e2b's"})
	q := func(id, exp string) string {
		s := "/files?path=workspace/a.txt&username=user&signature=" + signFiles(ft.token("envd", id), "workspace/a.txt", "read", "user", exp)
		if exp != "" {
			s += "&signature_expiration=" + exp
		}
		return s
	}
	past := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	for _, tc := range []struct {
		name, target string
		headers      map[string]string
		want         int
		body         string
	}{
		{"its own, named", q(hutchMade, ""), map[string]string{headerSandboxID: hutchMade}, http.StatusOK, "hutch's"},
		{"the SDK's, naming none", q(e2bMade, ""), nil, http.StatusOK, "e2b's"},
		{"another sandbox's signature, naming this one", q(e2bMade, ""), map[string]string{headerSandboxID: hutchMade}, http.StatusUnauthorized, ""},
		{"a sandbox not made through E2B, naming none", q(hutchMade, ""), nil, http.StatusBadRequest, ""},
		{"expired, naming none", q(e2bMade, past), nil, http.StatusBadRequest, ""},
		{"no signature's shape, naming none", "/files?path=workspace/a.txt&username=user&signature=v1_x", nil, http.StatusBadRequest, ""},
	} {
		status, _, body := ft.raw(t, http.MethodGet, tc.target, tc.headers, "")
		if status != tc.want || tc.body != "" && body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, status, body, tc.want, tc.body)
		}
	}
}

// Finding 16: a secret's value never leaves through /files in parts: a
// Range would cut it where redaction cannot see it, so a redacted read is
// whole.
func TestAttackE2BFilesRange(t *testing.T) {
	t.Parallel()
	ft := newFrontTest(t)
	content := "token=" + attackSecret + "\n"
	id := ft.sandbox(t, true, map[string]string{"env.txt": content})
	headers := map[string]string{headerSandboxID: id, headerAccessToken: ft.token("envd", id)}
	for _, rng := range []string{"bytes=6-12", "bytes=7-", "bytes=-10", "bytes=0-3,6-12"} {
		headers["Range"] = rng
		status, h, body := ft.raw(t, http.MethodGet, "/files?path=workspace/env.txt&username=user", headers, "")
		if status != http.StatusOK || h.Get("Content-Range") != "" || !strings.HasPrefix(body, "token=[redacted") {
			t.Errorf("Range %s: %d %v %q, want the whole file, redacted", rng, status, h, body)
		}
		for i := 0; i+6 <= len(attackSecret); i++ {
			if strings.Contains(body, attackSecret[i:i+6]) {
				t.Errorf("Range %s: %d %q holds a part of the secret", rng, status, body)
				break
			}
		}
	}
}
