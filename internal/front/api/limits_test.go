package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// call makes one request with key and returns its status, body and
// Retry-After.
func call(t *testing.T, method, url, key string, body io.Reader, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header.Get("Retry-After")
}

// Each key has a rate of its own: one over it is refused with
// rate_limited and a Retry-After, and another key is not slowed by it.
func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, func(c *Config) { c.Limits = Limits{Rate: 0.01, Burst: 3} })
	other, err := s.client.CreateAPIKey(t.Context(), "other", "") // 1 of 3
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		if code, body, _ := call(t, "GET", s.url+"/v1/sandboxes", testKey, nil, nil); code != 200 {
			t.Fatalf("request %d of the burst: %d %s", i, code, body)
		}
	}
	code, body, retry := call(t, "GET", s.url+"/v1/sandboxes", testKey, nil, nil)
	if code != 429 || !strings.Contains(body, `"code":"rate_limited"`) || !strings.Contains(body, "requests a second") || retry == "" {
		t.Errorf("over the rate: %d %s (Retry-After %q), want 429 rate_limited with a Retry-After", code, body, retry)
	}
	if code, body, _ := call(t, "GET", s.url+"/v1/sandboxes", other.Key, nil, nil); code != 200 {
		t.Errorf("another key: %d %s, want its own rate", code, body)
	}
}

// A key holds at most its number of streams open; one that ends frees
// its place.
func TestStreamsPerKey(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
	s := newTestServer(t, func(c *Config) { c.Limits = Limits{Streams: 1} })
	sb, err := s.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), sb.ID) })
	watch := s.url + "/v1/sandboxes/" + sb.ID + "/files/watch?path=" + url.QueryEscape(s.be.Root(sb.ID)+"/tmp")
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", watch, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("first stream: %d %s", res.StatusCode, b)
	}
	code, body, _ := call(t, "GET", watch, testKey, nil, map[string]string{"Accept": "text/event-stream"})
	if code != 429 || !strings.Contains(body, `"code":"rate_limited"`) || !strings.Contains(body, "streams open") {
		t.Errorf("a second stream: %d %s, want 429 rate_limited", code, body)
	}
	if code, body, _ := call(t, "GET", s.url+"/v1/sandboxes", testKey, nil, nil); code != 200 {
		t.Errorf("a plain call beside the stream: %d %s", code, body)
	}
	cancel()
	res.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sctx, scancel := context.WithTimeout(t.Context(), time.Second)
		req, _ := http.NewRequestWithContext(sctx, "GET", watch, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		scancel()
		if err == nil && res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the place of an ended stream was not freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Requests over a size bound are refused with too_large, saying which.
func TestRequestSizeLimits(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	tests := []struct {
		name     string
		path     string
		body     io.Reader
		header   map[string]string
		wantText string
	}{
		{"URL", "/v1/sandboxes?x=" + strings.Repeat("a", maxURL), nil, nil, "URL is"},
		{"headers", "/v1/sandboxes", nil, map[string]string{"X-Big": strings.Repeat("h", maxHeaders)}, "headers are"},
		{"JSON body", "/v1/secrets", strings.NewReader(`{"name":"a","value":"` + strings.Repeat("v", maxJSONBody) + `"}`), nil, "over 8 MiB, the limit of POST /v1/secrets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := "GET"
			if tt.body != nil {
				method = "POST"
			}
			code, body, _ := call(t, method, s.url+tt.path, testKey, tt.body, tt.header)
			if code != 413 || !strings.Contains(body, `"code":"too_large"`) || !strings.Contains(body, tt.wantText) {
				t.Errorf("got %d %.300s, want 413 too_large saying %q", code, body, tt.wantText)
			}
		})
	}
}

// A client that sends its body a byte at a time has its connection
// closed after the grace period, not held.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, func(c *Config) { c.Limits = Limits{bodyGrace: 300 * time.Millisecond, minBodyRate: 1024} })
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /v1/secrets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", testKey); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	closed := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(conn).ReadString(0) // until the server closes the connection
		closed <- err
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-closed:
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmt.Sprint(err), "reset") {
				t.Errorf("the connection ended with %v", err)
			}
			if d := time.Since(began); d > 3*time.Second {
				t.Errorf("the slow body held its connection %s", d)
			}
			return
		case <-tick.C:
			if time.Since(began) > 5*time.Second {
				t.Fatal("a body sent a byte every 100 ms holds its connection past 5 s; the grace is 300 ms")
			}
			_, _ = conn.Write([]byte(" "))
		}
	}
}
