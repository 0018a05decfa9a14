package agentclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
	"github.com/hutchdev/hutch/internal/errdefs"
)

// fakeProcess fails every call with err and records request headers.
type fakeProcess struct {
	processconnect.UnimplementedProcessHandler
	err    error
	header chan http.Header
}

func (f *fakeProcess) List(_ context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	if f.header != nil {
		f.header <- req.Header()
	}
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&process.ListResponse{}), nil
}

func (f *fakeProcess) Start(_ context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	if f.header != nil {
		f.header <- req.Header()
	}
	if err := stream.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: 1}}}}); err != nil {
		return err
	}
	return f.err
}

// serve runs handler over HTTP on loopback and returns a client dialing it.
func serve(t *testing.T, handler http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	c := New(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestConnectErrors(t *testing.T) {
	tests := []struct {
		code connect.Code
		kind error
		msg  string
	}{
		{connect.CodeNotFound, errdefs.ErrNotFound, "boom"},
		{connect.CodeInvalidArgument, errdefs.ErrInvalidArgument, "boom"},
		{connect.CodeAlreadyExists, errdefs.ErrAlreadyExists, "boom"},
		{connect.CodeFailedPrecondition, errdefs.ErrFailedPrecondition, "boom"},
		{connect.CodePermissionDenied, errdefs.ErrFailedPrecondition, "permission denied: boom"},
		{connect.CodeResourceExhausted, errdefs.ErrResourceExhausted, "boom"},
		{connect.CodeUnimplemented, errdefs.ErrNotImplemented, "boom"},
		{connect.CodeUnavailable, errdefs.ErrUnavailable, "agent unavailable: boom"},
		{connect.CodeInternal, nil, "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			f := &fakeProcess{err: connect.NewError(tt.code, errors.New("boom"))}
			path, h := processconnect.NewProcessHandler(f)
			mux := http.NewServeMux()
			mux.Handle(path, h)
			c := serve(t, mux)

			_, err := c.Process.List(t.Context(), connect.NewRequest(&process.ListRequest{}))
			check := func(what string, err error) {
				t.Helper()
				if errdefs.Kind(err) != tt.kind || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("%s: %v (kind %v), want kind %v with %q", what, err, errdefs.Kind(err), tt.kind, tt.msg)
				}
				if tt.kind != nil {
					if msg, ok := errdefs.UserMessage(err); !ok || msg != tt.msg {
						t.Errorf("%s: user message %q, want %q", what, msg, tt.msg)
					}
				}
			}
			check("unary", err)

			stream, err := c.Process.Start(t.Context(), connect.NewRequest(&process.StartRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			events := 0
			for stream.Receive() {
				events++
			}
			if events != 1 {
				t.Errorf("%d events before the error", events)
			}
			check("stream", stream.Err())
		})
	}
}

func TestTransportErrors(t *testing.T) {
	c := New(func(context.Context) (net.Conn, error) { return nil, errors.New("no route to agent") })
	if _, err := c.Process.List(t.Context(), connect.NewRequest(&process.ListRequest{})); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("List: %v", err)
	}
	if err := c.Health(t.Context()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Health: %v", err)
	}
	if _, err := c.ReadFile(t.Context(), "x", ""); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("ReadFile: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Process.List(ctx, connect.NewRequest(&process.ListRequest{})); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a canceled context: %v", err)
	}
}

func TestHeaders(t *testing.T) {
	f := &fakeProcess{header: make(chan http.Header, 1)}
	path, h := processconnect.NewProcessHandler(f)
	mux := http.NewServeMux()
	mux.Handle(path, h)
	c := serve(t, mux)

	req := WithTimeout(WithUser(connect.NewRequest(&process.StartRequest{}), "root"), 1500*time.Millisecond, 0)
	stream, err := c.Process.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	got := <-f.header
	if got.Get("Authorization") != "Basic cm9vdDo=" || got.Get("Hutch-Timeout-Ms") != "1500" || got.Get("Hutch-Kill-Grace-Ms") != "0" {
		t.Errorf("headers %v", got)
	}

	if _, err := c.Process.List(t.Context(), WithUser(connect.NewRequest(&process.ListRequest{}), "")); err != nil {
		t.Fatal(err)
	}
	if got := <-f.header; got.Get("Authorization") != "" {
		t.Errorf("empty user sent %q", got.Get("Authorization"))
	}
}

func TestFiles(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /files", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("path") {
		case "ok":
			if r.URL.Query().Get("username") != "root" {
				http.Error(w, "no user", http.StatusTeapot)
				return
			}
			_, _ = io.WriteString(w, "content")
		case "missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"not_found","message":"/x: no such file or directory"}`)
		case "denied":
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"code":"permission_denied","message":"/x: permission denied"}`)
		case "full":
			w.WriteHeader(http.StatusInsufficientStorage)
			_, _ = io.WriteString(w, "not json")
		default:
			w.WriteHeader(http.StatusConflict)
		}
	})
	mux.HandleFunc("POST /files", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/octet-stream" || string(body) != "data" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":"invalid_argument","message":"bad upload"}`)
			return
		}
		_, _ = io.WriteString(w, `[{"name":"f","type":"file","path":"/home/user/f"}]`)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	c := serve(t, mux)

	if err := c.Health(t.Context()); err != nil {
		t.Errorf("Health: %v", err)
	}
	r, err := c.ReadFile(t.Context(), "ok", "root")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	_ = r.Close()
	if string(b) != "content" {
		t.Errorf("read %q", b)
	}
	tests := []struct {
		path string
		kind error
		msg  string
	}{
		{"missing", errdefs.ErrNotFound, "/x: no such file or directory"},
		{"denied", errdefs.ErrFailedPrecondition, "permission denied: /x: permission denied"},
		{"full", errdefs.ErrResourceExhausted, "507 Insufficient Storage"},
		{"conflict", errdefs.ErrAlreadyExists, "409 Conflict"},
	}
	for _, tt := range tests {
		_, err := c.ReadFile(t.Context(), tt.path, "")
		if !errors.Is(err, tt.kind) || err.Error() != tt.msg {
			t.Errorf("ReadFile(%s) = %v, want %v %q", tt.path, err, tt.kind, tt.msg)
		}
	}

	w, err := c.WriteFile(t.Context(), "f", "", strings.NewReader("data"))
	if err != nil || w.Path != "/home/user/f" || w.Name != "f" {
		t.Errorf("WriteFile = %+v, %v", w, err)
	}
	if _, err := c.WriteFile(t.Context(), "f", "", strings.NewReader("other")); !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != "bad upload" {
		t.Errorf("WriteFile rejected = %v", err)
	}
}
