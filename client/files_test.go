package client

import (
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteFileStreams uploads 12 MiB through a pipe whose writer waits until
// the server has received the first part: a client that buffered the whole
// body before sending would never get there.
func TestWriteFileStreams(t *testing.T) {
	const size = 12 << 20
	firstPart := make(chan struct{})
	var gotLen int64 = -2
	var gotSum [32]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLen = r.ContentLength
		h := sha256.New()
		buf := make([]byte, 1<<20)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			t.Errorf("read first part: %v", err)
		}
		h.Write(buf)
		close(firstPart)
		if _, err := io.Copy(h, r.Body); err != nil {
			t.Errorf("read rest: %v", err)
		}
		copy(gotSum[:], h.Sum(nil))
		_, _ = io.WriteString(w, `{"name":"big","path":"/home/user/workspace/big","type":"file","size":12582912}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := New(srv.URL, "k")

	pr, pw := io.Pipe()
	want := sha256.New()
	go func() {
		block := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
		for i := range size / len(block) {
			block[0] = byte(i)
			want.Write(block)
			if _, err := pw.Write(block); err != nil {
				return
			}
			if i == 0 {
				select {
				case <-firstPart:
				case <-time.After(5 * time.Second):
					pw.CloseWithError(io.ErrNoProgress)
					return
				}
			}
		}
		_ = pw.Close()
	}()
	fe, err := c.WriteFile(t.Context(), "sb1", "big", pr)
	if err != nil {
		t.Fatal(err)
	}
	if fe.Size != size {
		t.Errorf("size %d", fe.Size)
	}
	if gotLen != -1 {
		t.Errorf("ContentLength = %d, want -1 (chunked)", gotLen)
	}
	if [32]byte(want.Sum(nil)) != gotSum {
		t.Error("server received different bytes")
	}
}

func TestWriteFileLeavesFileOpen(t *testing.T) {
	c, _ := newRecordingServer(t, 200, entryJSON)
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := c.WriteFile(t.Context(), "sb1", "f", f); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatalf("file closed by WriteFile: %v", err)
	}
}

// TestReadFileStreams reads the first part of a file while the server has not
// yet sent the rest.
func TestReadFileStreams(t *testing.T) {
	gotFirst := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sandboxes/sb1/files" || r.URL.Query().Get("path") != "/etc/motd" || r.URL.Query().Get("user") != "root" {
			t.Errorf("request %s", r.URL)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, "first;")
		w.(http.Flusher).Flush()
		select {
		case <-gotFirst:
		case <-time.After(5 * time.Second):
			t.Error("client did not read the first part while the body was open")
		}
		_, _ = io.WriteString(w, "second")
	}))
	t.Cleanup(srv.Close)
	c, _ := New(srv.URL, "k")
	rc, err := c.ReadFile(t.Context(), "sb1", "/etc/motd", AsUser("root"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	buf := make([]byte, len("first;"))
	if _, err := io.ReadFull(rc, buf); err != nil || string(buf) != "first;" {
		t.Fatalf("first part %q, %v", buf, err)
	}
	close(gotFirst)
	rest, err := io.ReadAll(rc)
	if err != nil || string(rest) != "second" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestReadFileError(t *testing.T) {
	c, _ := newRecordingServer(t, 404, `{"error":{"code":"not_found","message":"no such file: /x"}}`)
	_, err := c.ReadFile(t.Context(), "sb1", "/x")
	if !IsNotFound(err) || err.Error() != "no such file: /x" {
		t.Fatalf("err = %v", err)
	}
}
