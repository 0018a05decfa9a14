package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		wantErr string
	}{
		{"http", "http://127.0.0.1:7070", ""},
		{"http trailing slash", "http://127.0.0.1:7070/", ""},
		{"https", "https://hutch.example.com", ""},
		{"unix", "unix:///run/hutch/hutch.sock", ""},
		{"host:port", "127.0.0.1:7070", ""},
		{"name:port", "localhost:7070", ""},
		{"ftp", "ftp://x", "scheme must be"},
		{"no host", "http://", "no host"},
		{"path", "http://x/api", "must not have a path"},
		{"unix no path", "unix://", "no socket path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.url, "k")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New(%q) = %v", tt.url, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New(%q) = %v, want error containing %q", tt.url, err, tt.wantErr)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "h.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "api.key"), []byte("filekey\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.sock")

	tests := []struct {
		name    string
		env     map[string]string
		socket  string
		wantURL string
		wantKey string
	}{
		{"env wins", map[string]string{"HUTCH_URL": "http://h:1", "HUTCH_API_KEY": "envkey", "HUTCH_DATA_DIR": dataDir}, sock, "http://h:1", "envkey"},
		{"socket when present", map[string]string{"HUTCH_DATA_DIR": dataDir}, sock, "unix://" + sock, "filekey"},
		{"tcp default", map[string]string{"HUTCH_DATA_DIR": dataDir}, missing, DefaultURL, "filekey"},
		{"a regular file is not a socket", map[string]string{"HUTCH_DATA_DIR": dataDir}, filepath.Join(dataDir, "api.key"), DefaultURL, "filekey"},
		{"unreadable key", map[string]string{"HUTCH_DATA_DIR": filepath.Join(dir, "nope")}, missing, DefaultURL, ""},
		{"url from env, key from file", map[string]string{"HUTCH_URL": "http://h:1", "HUTCH_DATA_DIR": dataDir}, missing, "http://h:1", "filekey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			c, err := fromEnv(lookup, tt.socket)
			if err != nil {
				t.Fatal(err)
			}
			if c.URL() != tt.wantURL || c.apiKey != tt.wantKey {
				t.Errorf("got url %q key %q, want %q %q", c.URL(), c.apiKey, tt.wantURL, tt.wantKey)
			}
		})
	}
}

// recorded is what the test server saw of one request.
type recorded struct {
	method, path, rawQuery string
	header                 http.Header
	body                   string
}

// newRecordingServer answers every request with status and body (JSON unless
// body is empty) and sends what it saw on the returned channel.
func newRecordingServer(t *testing.T, status int, body string) (*Client, <-chan recorded) {
	t.Helper()
	seen := make(chan recorded, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(b)}
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "secret")
	if err != nil {
		t.Fatal(err)
	}
	return c, seen
}

const sandboxJSON = `{"id":"sb1","template":"host","runtime":"runc","state":"running","state_reason":"","cpus":1.5,"memory_mb":512,"pids":256,"idle_timeout_s":300,"metadata":{"k":"v"},"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06Z"}`
const entryJSON = `{"name":"a.txt","path":"/home/user/workspace/a.txt","type":"file","size":12,"mode":"0644","permissions":"-rw-r--r--","owner":"user","group":"user","modified_at":"2025-01-02T03:04:05Z"}`

func TestRequests(t *testing.T) {
	wantSandbox := &Sandbox{
		ID: "sb1", Template: "host", Runtime: "runc", State: "running", CPUs: 1.5, MemoryMB: 512,
		Pids: 256, IdleTimeoutS: 300, Metadata: map[string]string{"k": "v"},
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC),
	}
	wantEntry := &FileEntry{
		Name: "a.txt", Path: "/home/user/workspace/a.txt", Type: "file", Size: 12, Mode: "0644",
		Permissions: "-rw-r--r--", Owner: "user", Group: "user", ModifiedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	tests := []struct {
		name     string
		status   int
		respBody string
		call     func(ctx context.Context, c *Client) (any, error)
		want     any
		method   string
		path     string
		query    string
		reqBody  string // JSON compared structurally, or raw when reqRaw
		reqRaw   bool
	}{
		{
			name: "health", status: 200,
			respBody: `{"status":"ok","version":"0.1","backends":[{"name":"runc","binary":"/usr/sbin/runc","version":"1.1.5","usable":true,"reason":""}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Health(ctx) },
			want:     &Health{Status: "ok", Version: "0.1", Backends: []BackendHealth{{Name: "runc", Binary: "/usr/sbin/runc", Version: "1.1.5", Usable: true}}},
			method:   "GET", path: "/v1/health",
		},
		{
			name: "create", status: 201, respBody: sandboxJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSandbox(ctx, CreateSandboxRequest{Template: "py", CPUs: 2, Env: map[string]string{"A": "1"}, IdleTimeoutS: 60})
			},
			want:   wantSandbox,
			method: "POST", path: "/v1/sandboxes",
			reqBody: `{"template":"py","cpus":2,"env":{"A":"1"},"idle_timeout_s":60}`,
		},
		{
			name: "create defaults", status: 201, respBody: sandboxJSON,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateSandbox(ctx, CreateSandboxRequest{}) },
			want:   wantSandbox,
			method: "POST", path: "/v1/sandboxes", reqBody: `{}`,
		},
		{
			name: "list", status: 200, respBody: `{"sandboxes":[` + sandboxJSON + `]}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListSandboxes(ctx) },
			want:   []Sandbox{*wantSandbox},
			method: "GET", path: "/v1/sandboxes",
		},
		{
			name: "get escapes id", status: 200, respBody: sandboxJSON,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSandbox(ctx, "a/b c") },
			want:   wantSandbox,
			method: "GET", path: "/v1/sandboxes/a%2Fb%20c",
		},
		{
			name: "delete", status: 204,
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteSandbox(ctx, "sb1") },
			method: "DELETE", path: "/v1/sandboxes/sb1",
		},
		{
			name: "exec", status: 200,
			respBody: `{"exit_code":3,"stdout":"hi\n","stderr":"","duration_ms":12,"timed_out":false,"truncated":true,"killed_by":""}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Exec(ctx, "sb1", ExecRequest{Command: "echo hi", Cwd: "/tmp", User: "root", TimeoutS: 5, Stdin: "x"})
			},
			want:   &ExecResult{ExitCode: 3, Stdout: "hi\n", DurationMS: 12, Truncated: true},
			method: "POST", path: "/v1/sandboxes/sb1/exec",
			reqBody: `{"command":"echo hi","cwd":"/tmp","stdin":"x","user":"root","timeout_s":5}`,
		},
		{
			name: "write file", status: 200, respBody: entryJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.WriteFile(ctx, "sb1", "a b&c.txt", strings.NewReader("hello world\n"), AsUser("root"))
			},
			want:   wantEntry,
			method: "PUT", path: "/v1/sandboxes/sb1/files", query: "path=a+b%26c.txt&user=root",
			reqBody: "hello world\n", reqRaw: true,
		},
		{
			name: "delete file", status: 204,
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteFile(ctx, "sb1", "/tmp/x") },
			method: "DELETE", path: "/v1/sandboxes/sb1/files", query: "path=%2Ftmp%2Fx",
		},
		{
			name: "stat", status: 200, respBody: entryJSON,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.StatFile(ctx, "sb1", "a.txt") },
			want:   wantEntry,
			method: "GET", path: "/v1/sandboxes/sb1/files/stat", query: "path=a.txt",
		},
		{
			name: "list files", status: 200, respBody: `{"entries":[` + entryJSON + `]}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListFiles(ctx, "sb1", ".", 3) },
			want:   []FileEntry{*wantEntry},
			method: "GET", path: "/v1/sandboxes/sb1/files/list", query: "depth=3&path=.",
		},
		{
			name: "list files default depth", status: 200, respBody: `{"entries":[]}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListFiles(ctx, "sb1", "d", 0) },
			want:   []FileEntry{},
			method: "GET", path: "/v1/sandboxes/sb1/files/list", query: "path=d",
		},
		{
			name: "mkdir", status: 201, respBody: entryJSON,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.MakeDir(ctx, "sb1", "d/e") },
			want:   wantEntry,
			method: "POST", path: "/v1/sandboxes/sb1/files/mkdir", reqBody: `{"path":"d/e"}`,
		},
		{
			name: "move", status: 200, respBody: entryJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.MoveFile(ctx, "sb1", "a", "b", AsUser("root"))
			},
			want:   wantEntry,
			method: "POST", path: "/v1/sandboxes/sb1/files/move", reqBody: `{"source":"a","destination":"b","user":"root"}`,
		},
		{
			name: "desktop actions", status: 200, respBody: `{"cursor":{"x":3,"y":4},"screenshot":"iVBORw=="}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DesktopActions(ctx, "sb1", DesktopActionsRequest{
					Actions:    []DesktopAction{{Type: "click", X: At(3), Y: At(4), Button: "right"}, {Type: "type", Text: "hi"}},
					Screenshot: &DesktopShot{Scale: 0.5},
				})
			},
			want:   DesktopActionsResult{Cursor: Point{X: 3, Y: 4}, Screenshot: []byte{0x89, 0x50, 0x4e, 0x47}},
			method: "POST", path: "/v1/sandboxes/sb1/desktop/actions",
			reqBody: `{"actions":[{"type":"click","x":3,"y":4,"button":"right"},{"type":"type","text":"hi"}],"screenshot":{"scale":0.5}}`,
		},
		{
			name: "desktop screenshot of a region", status: 200, respBody: "PNG",
			call: func(ctx context.Context, c *Client) (any, error) {
				b, err := c.DesktopScreenshot(ctx, "sb1", DesktopShot{Region: &Clip{X: 1, Y: 2, W: 30, H: 40}, Scale: 0.25})
				return string(b), err
			},
			want:   "PNG",
			method: "GET", path: "/v1/sandboxes/sb1/desktop/screenshot", query: "h=40&scale=0.25&w=30&x=1&y=2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, seen := newRecordingServer(t, tt.status, tt.respBody)
			got, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			r := <-seen
			if r.method != tt.method || r.path != tt.path || r.rawQuery != tt.query {
				t.Errorf("request %s %s?%s, want %s %s?%s", r.method, r.path, r.rawQuery, tt.method, tt.path, tt.query)
			}
			if h := r.header.Get("Authorization"); h != "Bearer secret" {
				t.Errorf("Authorization = %q", h)
			}
			switch {
			case tt.reqRaw:
				if r.body != tt.reqBody {
					t.Errorf("body %q, want %q", r.body, tt.reqBody)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
					t.Errorf("Content-Type = %q", ct)
				}
			case tt.reqBody != "":
				var gotBody, wantBody any
				if err := json.Unmarshal([]byte(r.body), &gotBody); err != nil {
					t.Fatalf("request body %q: %v", r.body, err)
				}
				_ = json.Unmarshal([]byte(tt.reqBody), &wantBody)
				if !reflect.DeepEqual(gotBody, wantBody) {
					t.Errorf("body %s, want %s", r.body, tt.reqBody)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
			default:
				if r.body != "" {
					t.Errorf("unexpected body %q", r.body)
				}
			}
		})
	}
}

func TestEmptyID(t *testing.T) {
	c, _ := newRecordingServer(t, 200, "{}")
	if _, err := c.GetSandbox(t.Context(), ""); err == nil {
		t.Fatal("GetSandbox(\"\") succeeded")
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		want     Error
		notFound bool
	}{
		{"api error", 404, `{"error":{"code":"not_found","message":"sandbox abc not found"}}`, Error{404, "not_found", "sandbox abc not found"}, true},
		{"precondition", 412, `{"error":{"code":"failed_precondition","message":"sandbox is stopped"}}`, Error{412, "failed_precondition", "sandbox is stopped"}, false},
		{"not json", 502, `<html>bad gateway</html>`, Error{502, "unavailable", "502 Bad Gateway: <html>bad gateway</html>"}, false},
		{"empty 404", 404, ``, Error{404, "not_found", "404 Not Found"}, true},
		{"unknown status", 418, ``, Error{418, "internal", "418 I'm a teapot"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newRecordingServer(t, tt.status, tt.body)
			_, err := c.GetSandbox(t.Context(), "abc")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %#v, want *Error", err)
			}
			if *e != tt.want {
				t.Errorf("err = %+v, want %+v", *e, tt.want)
			}
			if err.Error() != tt.want.Message {
				t.Errorf("Error() = %q", err.Error())
			}
			if IsNotFound(err) != tt.notFound {
				t.Errorf("IsNotFound = %v", !tt.notFound)
			}
		})
	}
}

func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health" || r.Header.Get("Authorization") != "" {
			http.Error(w, "bad request", 400)
			return
		}
		_, _ = io.WriteString(w, `{"status":"ok","version":"v","backends":[]}`)
	}))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	c, err := New("unix://"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Version != "v" {
		t.Errorf("health = %+v", h)
	}
}

func TestConnectionError(t *testing.T) {
	c, err := New("unix://"+filepath.Join(t.TempDir(), "none.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Health(t.Context())
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("err = %v, want a dial *net.OpError", err)
	}
}

func TestContextCanceled(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	c, _ := New(srv.URL, "")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

func TestFromEnvSkipsForbiddenSocket(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may connect to any socket")
	}
	sock := filepath.Join(t.TempDir(), "h.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := os.Chmod(sock, 0o600&^0o200); err != nil {
		t.Fatal(err)
	}
	c, err := fromEnv(func(string) (string, bool) { return "", false }, sock)
	if err != nil {
		t.Fatal(err)
	}
	if c.URL() != DefaultURL {
		t.Errorf("url %q, want %q", c.URL(), DefaultURL)
	}
}
