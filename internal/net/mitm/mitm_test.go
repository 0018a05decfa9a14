package mitm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seen is what the echo handler saw of a request.
type seen struct {
	Auth   string   `json:"auth"`
	Both   []string `json:"both"`
	Key    string   `json:"key"`
	Query  string   `json:"query"`
	Body   string   `json:"body"`
	Host   string   `json:"host"`
	Target string   `json:"target"`
}

// echo answers with what it saw of the request, in base32: a host that
// reflects headers transformed in a way no scrubbing of responses can
// follow (which the threat model warns of), so that tests see what the
// host saw. decodeSeen reads it.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b, _ := json.Marshal(seen{
		Auth: r.Header.Get("Authorization"), Both: r.Header.Values("X-Both-Token"),
		Key: r.URL.Query().Get("key"), Query: r.URL.RawQuery, Body: string(body),
		Host: r.Host, Target: r.RequestURI,
	})
	_, _ = io.WriteString(w, base32.StdEncoding.EncodeToString(b))
}

// decodeSeen reads echo's answer, to its end.
func decodeSeen(r io.Reader, s *seen) error {
	b, err := io.ReadAll(base32.NewDecoder(base32.StdEncoding, r))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, s)
}

func TestSwap(t *testing.T) {
	t.Parallel()
	one := []Swap{{Placeholder: ph1, Value: v1}}
	tests := []struct {
		name   string
		swaps  []Swap
		target string
		header http.Header
		body   string
		want   func(s seen) string // "" when right
	}{
		{
			name: "bearer header", swaps: one, target: "/v1/models",
			header: http.Header{"Authorization": {"Bearer " + ph1}},
			want:   wantField("auth", func(s seen) string { return s.Auth }, "Bearer "+v1),
		},
		{
			name: "query when asked", swaps: []Swap{{Placeholder: ph1, Value: v1, Query: true}},
			target: "/v1/search?x=1&key=" + ph1 + "&y=" + ph1,
			want: func(s seen) string {
				esc := "x=1&key=sk-live%2Fabc%2Bdef%3Dghi%26jkl&y=sk-live%2Fabc%2Bdef%3Dghi%26jkl"
				if s.Key != v1 || s.Query != esc || !strings.HasPrefix(s.Target, "/v1/search?") {
					return fmt.Sprintf("key %q query %q target %q", s.Key, s.Query, s.Target)
				}
				return ""
			},
		},
		{
			name: "query not asked", swaps: one, target: "/v1/search?key=" + ph1,
			want: wantField("key", func(s seen) string { return s.Key }, ph1),
		},
		{
			name: "placeholder of a secret not in swaps", swaps: one, target: "/",
			header: http.Header{"Authorization": {"Bearer " + ph3}},
			want:   wantField("auth", func(s seen) string { return s.Auth }, "Bearer "+ph3),
		},
		{
			name: "repeated, and two secrets", swaps: []Swap{{Placeholder: ph1, Value: v1}, {Placeholder: ph2, Value: v2}},
			target: "/", header: http.Header{"X-Both-Token": {ph1 + ":" + ph1 + " " + ph2, "plain", ph2}},
			want: func(s seen) string {
				want := []string{v1 + ":" + v1 + " " + v2, "plain", v2}
				if strings.Join(s.Both, "|") != strings.Join(want, "|") {
					return fmt.Sprintf("X-Both-Token %q, want %q", s.Both, want)
				}
				return ""
			},
		},
		{
			name: "body not swapped", swaps: one, target: "/", body: `{"key":"` + ph1 + `"}`,
			want: wantField("body", func(s seen) string { return s.Body }, `{"key":"`+ph1+`"}`),
		},
		{
			name: "value that cannot be a header value", swaps: []Swap{{Placeholder: ph1, Value: "line\nbreak"}},
			target: "/", header: http.Header{"Authorization": {"Bearer " + ph1}},
			want: wantField("auth", func(s seen) string { return s.Auth }, "Bearer "+ph1),
		},
		{
			name: "empty placeholder ignored", swaps: []Swap{{Placeholder: "", Value: v1}},
			target: "/", header: http.Header{"Authorization": {"Bearer x"}},
			want: wantField("auth", func(s seen) string { return s.Auth }, "Bearer x"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, config{handler: http.HandlerFunc(echo), swaps: tt.swaps})
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+apiHost+tt.target, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range tt.header {
				req.Header[k] = vs
			}
			resp, err := h.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var s seen
			if err := decodeSeen(resp.Body, &s); err != nil {
				t.Fatal(err)
			}
			if msg := tt.want(s); msg != "" {
				t.Error(msg)
			}
			if s.Host != apiHost {
				t.Errorf("host saw Host %q", s.Host)
			}
		})
	}
}

func wantField(name string, get func(seen) string, want string) func(seen) string {
	return func(s seen) string {
		if got := get(s); got != want {
			return fmt.Sprintf("%s %q, want %q", name, got, want)
		}
		return ""
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config{handler: http.HandlerFunc(echo), swaps: []Swap{{Placeholder: ph1, Value: v1}}})
	c := h.client()
	var received int64
	for i := range 5 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+apiHost+"/n/"+strconv.Itoa(i), nil)
		req.Header.Set("Authorization", "Bearer "+ph1)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var s seen
		err = decodeSeen(resp.Body, &s)
		_ = resp.Body.Close()
		if err != nil || s.Auth != "Bearer "+v1 || s.Target != "/n/"+strconv.Itoa(i) {
			t.Fatalf("request %d: %v, %+v", i, err, s)
		}
		received += int64(len(s.Target))
	}
	if n := h.accepted.Load(); n != 1 {
		t.Errorf("%d connections for 5 requests, want 1", n)
	}
	if h.out.Load() < 5*50 || h.in.Load() < received {
		t.Errorf("counted %d bytes out, %d in", h.out.Load(), h.in.Load())
	}
}

// pattern is a body made as it is read, never held: size bytes, hashed
// and counted as they go.
type pattern struct {
	left, off int64
	produced  *atomic.Int64
	sum       hash.Hash
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	for i := range b {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(len(b))
	p.left -= int64(len(b))
	p.sum.Write(b)
	p.produced.Add(int64(len(b)))
	return len(b), nil
}

func TestUploadStreams(t *testing.T) {
	t.Parallel()
	const size = 32 << 20
	tests := []struct {
		name    string
		length  int64 // -1: chunked
		chunked bool
	}{
		{name: "chunked", length: -1, chunked: true},
		{name: "content-length", length: size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var received, produced atomic.Int64
			paused, resume := make(chan struct{}), make(chan struct{})
			handler := func(w http.ResponseWriter, r *http.Request) {
				sum := sha256.New()
				buf := make([]byte, 32<<10)
				first := true
				for {
					n, err := r.Body.Read(buf)
					sum.Write(buf[:n])
					if received.Add(int64(n)) >= 1<<20 && first {
						first = false
						close(paused)
						<-resume
					}
					if err != nil {
						break
					}
				}
				_, _ = fmt.Fprintf(w, "%d %x %v", received.Load(), sum.Sum(nil), r.TransferEncoding)
			}
			h := newHarness(t, config{handler: http.HandlerFunc(handler), smallBuffers: true})
			release := sync.OnceFunc(func() { close(resume) })
			t.Cleanup(release) // the handler must end before the host closes
			body := &pattern{left: size, produced: &produced, sum: sha256.New()}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "https://"+apiHost+"/upload", body)
			req.ContentLength = tt.length
			type result struct {
				body string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := h.client().Do(req)
				if err != nil {
					done <- result{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				done <- result{string(b), err}
			}()

			select {
			case <-paused:
			case r := <-done:
				t.Fatalf("upload ended before the host read 1 MiB: %+v", r)
			}
			// The host reads no more: the client must stall soon, having
			// sent only what buffers along the way hold.
			last := int64(-1)
			for produced.Load() != last {
				last = produced.Load()
				time.Sleep(200 * time.Millisecond)
			}
			inFlight := last - received.Load()
			t.Logf("%d bytes in flight while the host reads nothing", inFlight)
			if inFlight > 4<<20 {
				t.Errorf("%d bytes in flight while the host read nothing: the body is being held", inFlight)
			}
			release()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			want := fmt.Sprintf("%d %x %v", size, body.sum.Sum(nil), map[bool][]string{true: {"chunked"}, false: nil}[tt.chunked])
			if r.body != want {
				t.Errorf("host got %q, want %q", r.body, want)
			}
		})
	}
}

func TestResponseStreams(t *testing.T) {
	t.Parallel()
	const events = 3
	event := func(i int) string { return fmt.Sprintf("data: event %d\n\n", i) }
	tests := []struct {
		name   string
		length bool
	}{
		{name: "chunked"},
		{name: "content-length", length: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next := make(chan struct{})
			handler := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if tt.length {
					w.Header().Set("Content-Length", strconv.Itoa(events*len(event(0))))
				}
				for i := range events {
					_, _ = io.WriteString(w, event(i))
					w.(http.Flusher).Flush()
					if i < events-1 {
						select {
						case <-next:
						case <-r.Context().Done():
							return
						}
					}
				}
			}
			h := newHarness(t, config{handler: http.HandlerFunc(handler)})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+apiHost+"/events", nil)
			resp, err := h.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := resp.TransferEncoding; (len(got) > 0) == tt.length {
				t.Errorf("transfer encoding %v", got)
			}
			br := bufio.NewReader(resp.Body)
			for i := range events {
				// Each event arrives while the host waits before the next.
				a, err1 := br.ReadString('\n')
				b, err2 := br.ReadString('\n')
				if err1 != nil || err2 != nil || a+b != event(i) {
					t.Fatalf("event %d: %q %v %v", i, a+b, err1, err2)
				}
				if i < events-1 {
					next <- struct{}{}
				}
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Errorf("after the events: %q %v", rest, err)
			}
		})
	}
}

func TestNoBody(t *testing.T) {
	t.Parallel()
	handler := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
			w.Header().Set("Content-Length", "1234")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		default:
			_, _ = io.WriteString(w, "after")
		}
	}
	tests := []struct {
		name, method, path string
		status             int
		length             int64
	}{
		{"HEAD", http.MethodHead, "/head", 200, 1234},
		{"204", http.MethodGet, "/204", 204, 0},
		{"304", http.MethodGet, "/304", 304, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, config{handler: http.HandlerFunc(handler)})
			c := h.client()
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, "https://"+apiHost+tt.path, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || len(b) != 0 || resp.StatusCode != tt.status || resp.ContentLength != tt.length {
				t.Fatalf("status %d length %d body %q err %v", resp.StatusCode, resp.ContentLength, b, err)
			}
			// The connection is still in step: the next request on it
			// gets its own response.
			req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+apiHost+"/after", nil)
			resp, err = c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(b) != "after" || h.accepted.Load() != 1 {
				t.Errorf("next request: %q on %d connections", b, h.accepted.Load())
			}
		})
	}
}

func TestExpectContinue(t *testing.T) {
	t.Parallel()
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reject" {
			http.Error(w, "no", http.StatusUnauthorized) // before reading the body: no 100
			return
		}
		b, _ := io.ReadAll(r.Body) // reading sends the 100 Continue
		_, _ = fmt.Fprintf(w, "%d", len(b))
	}
	tests := []struct {
		name, path string
		status     int
	}{
		{"continued", "/accept", 200},
		{"rejected before the body", "/reject", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, config{handler: http.HandlerFunc(handler)})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+apiHost+tt.path, strings.NewReader(strings.Repeat("x", 1000)))
			req.Header.Set("Expect", "100-continue")
			began := time.Now()
			resp, err := h.client().Do(req) // waits up to 10 s for a 100
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tt.status || (tt.status == 200 && string(b) != "1000") {
				t.Errorf("status %d body %q", resp.StatusCode, b)
			}
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("took %v: the 100 Continue did not get through", d)
			}
		})
	}
}

func TestContextEndsConnection(t *testing.T) {
	t.Parallel()
	handler := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream without end
	}
	h := newHarness(t, config{handler: http.HandlerFunc(handler)})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+apiHost+"/events", nil)
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "data: first\n" {
		t.Fatalf("%q %v", line, err)
	}
	h.cancel()
	if err := h.result(); err != nil {
		t.Errorf("Serve after its context ended: %v", err)
	}
	if _, err := io.ReadAll(br); err == nil || ctx.Err() != nil {
		t.Errorf("the stream did not end with the context (read: %v)", err)
	}
}
