package agent

import (
	"bytes"
	"compress/gzip"
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

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
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

// postFiles sends POST /files?query with body and headers (name, value,
// …), and returns the status, the answer's files and its error body.
func postFiles(t *testing.T, hc *http.Client, query string, body io.Reader, headers ...string) (status int, files []fileResult, failure struct{ Code, Message string }) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://agent/files?"+query, body)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &files); err != nil {
			t.Fatalf("answer %q: %v", raw, err)
		}
	} else {
		_ = json.Unmarshal(raw, &failure)
	}
	return resp.StatusCode, files, failure
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Without ?path, each part's file name is the file's whole path, as E2B's
// files.write([{path, data}, …]) sends it: absolute or relative to the
// user's home, with the missing directories made for the user.
func TestFilesMultipartPaths(t *testing.T) {
	a := startAgent(t)
	hc := a.httpClient(t)
	parts := []struct{ name, want, content string }{
		{name: filepath.Join(a.home, "x/y/a.txt"), want: filepath.Join(a.home, "x/y/a.txt"), content: "A"},
		{name: "rel/dir/b.txt", want: filepath.Join(a.home, "rel/dir/b.txt"), content: "B"},
		{name: "~/tilde/c.txt", want: filepath.Join(a.home, "tilde/c.txt"), content: "C"},
		{name: filepath.Join(a.home, "x/y/ü n.txt"), want: filepath.Join(a.home, "x/y/ü n.txt"), content: "D"},
	}
	build := func() (*bytes.Buffer, string) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for _, p := range parts {
			fw, err := mw.CreateFormFile("file", p.name)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = fw.Write([]byte(p.content))
		}
		_ = mw.Close()
		return &body, mw.FormDataContentType()
	}

	check := func(t *testing.T, status int, files []fileResult) {
		t.Helper()
		if status != http.StatusOK || len(files) != len(parts) {
			t.Fatalf("status %d, answer %+v", status, files)
		}
		for i, p := range parts {
			if want := (fileResult{Name: filepath.Base(p.want), Type: "file", Path: p.want}); files[i] != want {
				t.Errorf("answer %d = %+v, want %+v", i, files[i], want)
			}
			if b, err := os.ReadFile(p.want); err != nil || string(b) != p.content {
				t.Errorf("%s: %q, %v", p.want, b, err)
			}
			for d := p.want; d != a.home; d = filepath.Dir(d) {
				if uid, gid, _ := owner(t, d); uid != testUID || gid != testUID {
					t.Errorf("%s belongs to %d:%d", d, uid, gid)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(a.home, "a.txt")); err == nil {
			t.Error("a part landed in home under its base name")
		}
	}

	t.Run("plain", func(t *testing.T) {
		body, ct := build()
		status, files, _ := postFiles(t, hc, "", body, "Content-Type", ct, "Authorization", "Basic dXNlcjo=")
		check(t, status, files)
	})
	t.Run("gzipped", func(t *testing.T) {
		body, ct := build()
		for _, p := range parts {
			_ = os.Remove(p.want)
		}
		status, files, _ := postFiles(t, hc, "", bytes.NewReader(gzipped(t, body.Bytes())), "Content-Type", ct, "Content-Encoding", "gzip")
		check(t, status, files)
	})
}

// A raw body (application/octet-stream, E2B's SDK for streams and gzip) is
// the file, written as it arrives.
func TestFilesOctetStream(t *testing.T) {
	a := startAgent(t)
	hc := a.httpClient(t)
	data := make([]byte, 3<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	const octets = "application/octet-stream"

	t.Run("streamed", func(t *testing.T) {
		want := filepath.Join(a.home, "deep/new/raw.bin")
		pr, pw := io.Pipe()
		type answer struct {
			status int
			files  []fileResult
		}
		answered := make(chan answer, 1)
		go func() {
			status, files, _ := postFiles(t, hc, "path=deep/new/raw.bin", pr, "Content-Type", octets)
			answered <- answer{status, files}
		}()
		half := len(data) / 2
		if _, err := pw.Write(data[:half]); err != nil {
			t.Fatal(err)
		}
		// The first half reaches the disk before the rest is sent.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			tmps, _ := filepath.Glob(filepath.Join(a.home, "deep/new/.raw.bin.upload-*"))
			if len(tmps) == 1 {
				if fi, err := os.Stat(tmps[0]); err == nil && fi.Size() >= int64(half)-64<<10 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the upload is not being written as it arrives: %v", tmps)
			}
		}
		if _, err := pw.Write(data[half:]); err != nil {
			t.Fatal(err)
		}
		_ = pw.Close()
		got := <-answered
		if got.status != http.StatusOK || len(got.files) != 1 || got.files[0] != (fileResult{Name: "raw.bin", Type: "file", Path: want}) {
			t.Fatalf("status %d, answer %+v", got.status, got.files)
		}
		if b, _ := os.ReadFile(want); !bytes.Equal(b, data) {
			t.Errorf("wrote %d bytes, differing from the %d sent", len(b), len(data))
		}
		if uid, _, _ := owner(t, filepath.Join(a.home, "deep")); uid != testUID {
			t.Errorf("directory made for uid %d", uid)
		}
	})

	t.Run("gzipped", func(t *testing.T) {
		want := filepath.Join(a.home, "unzipped.bin")
		status, files, _ := postFiles(t, hc, "path="+url.QueryEscape(want), bytes.NewReader(gzipped(t, data)), "Content-Type", octets, "Content-Encoding", "gzip")
		if status != http.StatusOK || len(files) != 1 || files[0].Path != want {
			t.Fatalf("status %d, answer %+v", status, files)
		}
		if b, _ := os.ReadFile(want); !bytes.Equal(b, data) {
			t.Errorf("wrote %d bytes, differing from the %d sent", len(b), len(data))
		}
	})

	tests := []struct {
		name     string
		body     []byte
		encoding string
		msg      string
	}{
		{name: "not gzip", body: []byte("plain"), encoding: "gzip", msg: "gzipped body"},
		{name: "corrupt gzip", body: gzipped(t, data)[:1000], encoding: "gzip", msg: "read upload of " + filepath.Join(a.home, "bad.bin")},
		{name: "unknown encoding", body: []byte("x"), encoding: "br", msg: `content encoding "br" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, failure := postFiles(t, hc, "path=bad.bin", bytes.NewReader(tt.body), "Content-Type", octets, "Content-Encoding", tt.encoding)
			if status != http.StatusBadRequest || failure.Code != "invalid_argument" || !strings.Contains(failure.Message, tt.msg) {
				t.Errorf("%d %+v, want 400 invalid_argument %q", status, failure, tt.msg)
			}
			if _, err := os.Stat(filepath.Join(a.home, "bad.bin")); err == nil {
				t.Error("a failed upload left its file")
			}
		})
	}
	if tmps, _ := filepath.Glob(filepath.Join(a.home, ".*upload-*")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}

// A full disk answers 507, as envd's does, and leaves nothing behind.
func TestFilesDiskFull(t *testing.T) {
	a := startAgent(t)
	small := filepath.Join(a.home, "small")
	if err := os.Mkdir(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(small, unix.MNT_DETACH) })
	target := filepath.Join(small, "big.bin")
	status, _, failure := postFiles(t, a.httpClient(t), "path="+url.QueryEscape(target), bytes.NewReader(make([]byte, 1<<20)), "Content-Type", "application/octet-stream")
	if status != http.StatusInsufficientStorage || failure.Code != "resource_exhausted" || failure.Message != target+": no space left on device" {
		t.Errorf("%d %+v, want 507 resource_exhausted naming %s", status, failure, target)
	}
	if entries, _ := os.ReadDir(small); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// GET /files answers gzip when asked (E2B's read({gzip: true})), and the
// bytes as they are otherwise and for ranges.
func TestFilesReadGzip(t *testing.T) {
	a := startAgent(t)
	hc := a.httpClient(t)
	data := bytes.Repeat([]byte("compressible "), 100_000)
	path := filepath.Join(a.home, "text.txt")
	writeFile(t, path, string(data))
	tests := []struct {
		name     string
		headers  []string
		status   int
		encoding string
		want     []byte
	}{
		{name: "gzip", headers: []string{"Accept-Encoding", "gzip"}, status: 200, encoding: "gzip", want: data},
		{name: "gzip among others", headers: []string{"Accept-Encoding", "br;q=1.0, gzip;q=0.8, deflate"}, status: 200, encoding: "gzip", want: data},
		{name: "gzip refused", headers: []string{"Accept-Encoding", "gzip;q=0"}, status: 200, want: data},
		{name: "no encoding asked", status: 200, want: data},
		{name: "range", headers: []string{"Accept-Encoding", "gzip", "Range", "bytes=13-25"}, status: 206, want: data[13:26]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://agent/files?path="+url.QueryEscape(path), nil)
			for i := 0; i+1 < len(tt.headers); i += 2 {
				req.Header.Set(tt.headers[i], tt.headers[i+1])
			}
			// Set by hand, Accept-Encoding makes the transport leave the
			// answer as it comes.
			if req.Header.Get("Accept-Encoding") == "" {
				req.Header.Set("Accept-Encoding", "identity")
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			wire := &countingReader{r: resp.Body}
			var body io.Reader = wire
			if resp.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(wire)
				if err != nil {
					t.Fatal(err)
				}
				body = zr
			}
			got, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Encoding") != tt.encoding || !bytes.Equal(got, tt.want) {
				t.Errorf("%d, encoding %q, %d bytes; want %d, %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Encoding"), len(got), tt.status, tt.encoding, len(tt.want))
			}
			if tt.encoding == "gzip" && wire.n >= len(data)/10 {
				t.Errorf("gzipped answer of %d bytes for %d compressible ones", wire.n, len(data))
			}
		})
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// GET /health answers 204 to anyone: no Authorization is needed.
func TestHealthNoAuth(t *testing.T) {
	a := startAgent(t)
	resp, err := a.httpClient(t).Get("http://agent/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Errorf("%d %q, want 204 and no body", resp.StatusCode, body)
	}
}
