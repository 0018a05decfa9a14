package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/errdefs"
)

// httpClient talks plain HTTP to the agent.
func (a *testAgent) httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return a.dial(ctx) }}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func owner(t *testing.T, path string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

func TestFilesRoundTrip(t *testing.T) {
	a := startAgent(t)
	data := make([]byte, 10<<20+123)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	w, err := a.client.WriteFile(t.Context(), "new/dir/blob.bin", "", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.home, "new/dir/blob.bin")
	if w.Path != path || w.Name != "blob.bin" {
		t.Errorf("written %+v", w)
	}
	for _, p := range []string{filepath.Join(a.home, "new"), filepath.Join(a.home, "new/dir"), path} {
		if uid, gid, _ := owner(t, p); uid != testUID || gid != testUID {
			t.Errorf("%s belongs to %d:%d", p, uid, gid)
		}
	}
	if _, _, mode := owner(t, path); mode != 0o644 {
		t.Errorf("mode %v", mode)
	}
	r, err := a.client.ReadFile(t.Context(), path, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("read %d bytes, differing from the %d written", len(got), len(data))
	}
	entries, _ := os.ReadDir(filepath.Join(a.home, "new/dir"))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestFilesReplaceKeepsMode(t *testing.T) {
	a := startAgent(t)
	path := filepath.Join(a.home, "script.sh")
	writeFile(t, path, "old")
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.WriteFile(t.Context(), path, "root", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	uid, _, mode := owner(t, path)
	if b, _ := os.ReadFile(path); string(b) != "new" || mode != 0o755 || uid != 0 {
		t.Errorf("content %q, mode %v, uid %d", b, mode, uid)
	}
	// Through a symlink, the target is replaced and the link kept.
	link := filepath.Join(a.home, "link.sh")
	if err := os.Symlink("script.sh", link); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.WriteFile(t.Context(), "link.sh", "", strings.NewReader("via link")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link replaced: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "via link" {
		t.Errorf("target content %q", b)
	}
}

func TestFilesMultipart(t *testing.T) {
	a := startAgent(t)
	hc := a.httpClient(t)
	upload := func(query string, files map[string]string) (*http.Response, []fileResult) {
		t.Helper()
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		_ = mw.WriteField("other", "ignored")
		for name, content := range files {
			fw, err := mw.CreateFormFile("file", name)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = fw.Write([]byte(content))
		}
		_ = mw.Close()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://agent/files?"+query, &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.SetBasicAuth("user", "")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res []fileResult
		_ = json.NewDecoder(resp.Body).Decode(&res)
		return resp, res
	}

	resp, res := upload("path="+url.QueryEscape("up/one.txt"), map[string]string{"ignored-name": "one"})
	want := filepath.Join(a.home, "up/one.txt")
	if resp.StatusCode != http.StatusOK || len(res) != 1 || res[0] != (fileResult{Name: "one.txt", Type: "file", Path: want}) {
		t.Errorf("status %d, answer %+v", resp.StatusCode, res)
	}
	if b, _ := os.ReadFile(want); string(b) != "one" {
		t.Errorf("content %q", b)
	}
	// Without a path, each part's file name is its path.
	resp, res = upload("", map[string]string{"a.txt": "A", "b.txt": "B"})
	if resp.StatusCode != http.StatusOK || len(res) != 2 {
		t.Errorf("status %d, answer %+v", resp.StatusCode, res)
	}
	for name, content := range map[string]string{"a.txt": "A", "b.txt": "B"} {
		if b, _ := os.ReadFile(filepath.Join(a.home, name)); string(b) != content {
			t.Errorf("%s: %q", name, b)
		}
	}
}

func TestFilesErrors(t *testing.T) {
	a := startAgent(t)
	hc := a.httpClient(t)
	tests := []struct {
		name   string
		method string
		query  string
		body   string
		status int
		code   string
		msg    string
	}{
		{name: "read a directory", method: http.MethodGet, query: "path=" + url.QueryEscape(a.home), status: 400, code: "invalid_argument", msg: a.home + " is a directory"},
		{name: "read missing", method: http.MethodGet, query: "path=missing", status: 404, code: "not_found", msg: filepath.Join(a.home, "missing") + ": no such file or directory"},
		{name: "read as unknown user", method: http.MethodGet, query: "path=x&username=nobody-here", status: 400, code: "invalid_argument", msg: `unknown user "nobody-here"`},
		{name: "write without path", method: http.MethodPost, query: "", body: "x", status: 400, code: "invalid_argument", msg: "path query parameter is required"},
		{name: "write onto a directory", method: http.MethodPost, query: "path=" + url.QueryEscape(a.home), body: "x", status: 400, code: "invalid_argument", msg: "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, "http://agent/files?"+tt.query, strings.NewReader(tt.body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Code, Message string }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tt.status || body.Code != tt.code || !strings.Contains(body.Message, tt.msg) {
				t.Errorf("%d %+v, want %d %s %q", resp.StatusCode, body, tt.status, tt.code, tt.msg)
			}
		})
	}

	// The typed client maps them to errdefs kinds.
	if _, err := a.client.ReadFile(t.Context(), "missing", ""); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("ReadFile(missing) = %v", err)
	}
	if _, err := a.client.ReadFile(t.Context(), a.home, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ReadFile(dir) = %v", err)
	}
	writeFile(t, filepath.Join(a.home, "file"), "")
	if _, err := a.client.WriteFile(t.Context(), "file/below", "", strings.NewReader("x")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("WriteFile below a file = %v", err)
	}
}

func TestHealth(t *testing.T) {
	a := startAgent(t)
	if err := a.client.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	a.client.CloseIdleConnections()
	if err := a.client.Health(t.Context()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("health of a stopped agent: %v", err)
	}
}

// A listener handed to the agent (as the runtime hands it the daemon's
// socket) is served, and a call made before the agent started is answered.
func TestHandedListener(t *testing.T) {
	requireRoot(t)
	dir, err := os.MkdirTemp("", "hutch-agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	})
	t.Cleanup(c.CloseIdleConnections)
	early := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		early <- c.Health(ctx)
	}()
	time.Sleep(50 * time.Millisecond) // the call waits in the socket's queue

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Listener: ln}) }()
	if err := <-early; err != nil {
		t.Errorf("call made before the agent started: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
