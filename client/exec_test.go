package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// sseServer answers exec requests with the given raw stream, written in the
// given pieces with a flush after each, so events arrive split across reads.
func sseServer(t *testing.T, pieces ...string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept = %q", r.Header.Get("Accept"))
		}
		var req ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Cmd) == 0 {
			t.Errorf("request body: %v %+v", err, req)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range pieces {
			_, _ = io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type chunk struct{ stream, data string }

func collect(got *[]chunk) func(ExecEvent) error {
	return func(ev ExecEvent) error {
		*got = append(*got, chunk{ev.Stream, string(ev.Data)})
		return nil
	}
}

func TestExecStream(t *testing.T) {
	tests := []struct {
		name     string
		pieces   []string
		want     []chunk
		wantExit *ExecExit
		wantErr  string
		wantCode string
	}{
		{
			name: "simple",
			pieces: []string{
				"event: stdout\ndata: {\"data\":\"hello\\n\"}\n\n",
				"event: stderr\ndata: {\"data\":\"oops\"}\n\n",
				"event: exit\ndata: {\"exit_code\":3,\"duration_ms\":7,\"timed_out\":false,\"killed_by\":\"\"}\n\n",
			},
			want:     []chunk{{"stdout", "hello\n"}, {"stderr", "oops"}},
			wantExit: &ExecExit{ExitCode: 3, DurationMS: 7},
		},
		{
			name: "split across reads, CRLF, comments, unknown events, base64",
			pieces: []string{
				": keep-alive\r\n\r\nevent: std", "out\r\nda", "ta: {\"data\":\"a\"}\r", "\n\r\n",
				"event: progress\ndata: {}\n\n",
				"id: 1\nevent: stdout\ndata:{\"data_base64\":\"/wA=\"}\n\n",
				"event: exit\ndata: {\"exit_code\":137,\"duration_ms\":1,\"timed_out\":true,\"killed_by\":\"timeout\"}\n", "\n",
			},
			want:     []chunk{{"stdout", "a"}, {"stdout", "\xff\x00"}},
			wantExit: &ExecExit{ExitCode: 137, DurationMS: 1, TimedOut: true, KilledBy: "timeout"},
		},
		{
			name: "error event",
			pieces: []string{
				"event: stdout\ndata: {\"data\":\"x\"}\n\n",
				"event: error\ndata: {\"error\":{\"code\":\"unavailable\",\"message\":\"agent went away\"}}\n\n",
			},
			want:     []chunk{{"stdout", "x"}},
			wantErr:  "agent went away",
			wantCode: "unavailable",
		},
		{
			name:    "cut before exit",
			pieces:  []string{"event: stdout\ndata: {\"data\":\"x\"}\n\n", "event: exit\ndata: {\"exit_co"},
			want:    []chunk{{"stdout", "x"}},
			wantErr: "ended before the command exited",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sseServer(t, tt.pieces...)
			var got []chunk
			exit, err := c.ExecStream(t.Context(), "sb1", ExecRequest{Cmd: []string{"x"}}, collect(&got))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks %q, want %q", got, tt.want)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.wantCode != "" && !hasCode(err, tt.wantCode) {
					t.Errorf("err = %#v, want code %s", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *exit != *tt.wantExit {
				t.Errorf("exit %+v, want %+v", exit, tt.wantExit)
			}
		})
	}
}

// TestExecStreamLive checks that events reach the callback while the stream is
// still open: the server sends "exit" only after the callback saw "stdout".
func TestExecStreamLive(t *testing.T) {
	seen := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: stdout\ndata: {\"data\":\"first\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			t.Error("callback did not see the first event while the stream was open")
			return
		}
		_, _ = io.WriteString(w, "event: exit\ndata: {\"exit_code\":0,\"duration_ms\":1,\"timed_out\":false,\"killed_by\":\"\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	c, _ := New(srv.URL, "")
	exit, err := c.ExecStream(t.Context(), "sb1", ExecRequest{Command: "x"}, func(ev ExecEvent) error {
		if string(ev.Data) == "first" {
			close(seen)
		}
		return nil
	})
	if err != nil || exit.ExitCode != 0 {
		t.Fatalf("exit %+v, err %v", exit, err)
	}
}

func TestExecStreamCallbackError(t *testing.T) {
	c := sseServer(t, "event: stdout\ndata: {\"data\":\"x\"}\n\n", "event: exit\ndata: {\"exit_code\":0}\n\n")
	stop := errors.New("stop")
	_, err := c.ExecStream(t.Context(), "sb1", ExecRequest{Cmd: []string{"x"}}, func(ExecEvent) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the callback's", err)
	}
}

func TestExecStreamErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		want    []chunk
		wantErr string
		exit    int
	}{
		{"api error before stream", 404, "application/json", `{"error":{"code":"not_found","message":"sandbox sb1 not found"}}`, nil, "sandbox sb1 not found", 0},
		{"plain JSON result", 200, "application/json", `{"exit_code":2,"stdout":"o","stderr":"e","duration_ms":1,"timed_out":false,"truncated":false,"killed_by":""}`, []chunk{{"stdout", "o"}, {"stderr", "e"}}, "", 2},
		{"other content type", 200, "text/html", `<html>`, nil, "unexpected response content type", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			c, _ := New(srv.URL, "")
			var got []chunk
			exit, err := c.ExecStream(t.Context(), "sb1", ExecRequest{Cmd: []string{"x"}}, collect(&got))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks %q, want %q", got, tt.want)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || exit.ExitCode != tt.exit {
				t.Fatalf("exit %+v err %v", exit, err)
			}
		})
	}
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the reader's buffer
	stream := "data: a\ndata: b\n\n" +   // two data lines, default name
		"event: e\n\n" + // no data: not dispatched, name reset
		"data\n\n" + // field without colon: empty data
		"event: big\ndata: " + long + "\n\n" +
		"event: last\ndata: z\n" // cut: dropped
	r := newSSEReader(iotest.HalfReader(strings.NewReader(stream)))
	want := []sseEvent{{"message", []byte("a\nb")}, {"message", []byte("")}, {"big", []byte(long)}}
	for i, w := range want {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.name != w.name || !bytes.Equal(ev.data, w.data) {
			t.Errorf("event %d = %q %.20q, want %q %.20q", i, ev.name, ev.data, w.name, w.data)
		}
	}
	if _, err := r.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after last: %v, want EOF", err)
	}
}
