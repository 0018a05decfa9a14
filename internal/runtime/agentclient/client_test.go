package agentclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent/hutchagentconnect"
	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// fakeAgent answers Hutch's service with its function fields; a nil one is
// unimplemented.
type fakeAgent struct {
	hutchagentconnect.UnimplementedAgentHandler
	health  func() error
	start   func(*hutchagent.StartRequest, func(*hutchagent.Event) error) error
	replay  func(*hutchagent.ReplayRequest, func(*hutchagent.Event) error) error
	signal  func(*hutchagent.SignalRequest) error
	runTool func(*hutchagent.RunToolRequest) (*hutchagent.RunToolResponse, error)
	archive func(*hutchagent.ArchiveRequest, func([]byte) error) error
}

func (f *fakeAgent) Health(ctx context.Context, req *connect.Request[hutchagent.HealthRequest]) (*connect.Response[hutchagent.HealthResponse], error) {
	if f.health == nil {
		return f.UnimplementedAgentHandler.Health(ctx, req)
	}
	if err := f.health(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&hutchagent.HealthResponse{}), nil
}

func (f *fakeAgent) Start(ctx context.Context, req *connect.Request[hutchagent.StartRequest], stream *connect.ServerStream[hutchagent.Event]) error {
	if f.start == nil {
		return f.UnimplementedAgentHandler.Start(ctx, req, stream)
	}
	return f.start(req.Msg, stream.Send)
}

func (f *fakeAgent) Replay(ctx context.Context, req *connect.Request[hutchagent.ReplayRequest], stream *connect.ServerStream[hutchagent.Event]) error {
	if f.replay == nil {
		return f.UnimplementedAgentHandler.Replay(ctx, req, stream)
	}
	return f.replay(req.Msg, stream.Send)
}

func (f *fakeAgent) Signal(ctx context.Context, req *connect.Request[hutchagent.SignalRequest]) (*connect.Response[hutchagent.SignalResponse], error) {
	if f.signal == nil {
		return f.UnimplementedAgentHandler.Signal(ctx, req)
	}
	if err := f.signal(req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&hutchagent.SignalResponse{}), nil
}

func (f *fakeAgent) RunTool(ctx context.Context, req *connect.Request[hutchagent.RunToolRequest]) (*connect.Response[hutchagent.RunToolResponse], error) {
	if f.runTool == nil {
		return f.UnimplementedAgentHandler.RunTool(ctx, req)
	}
	res, err := f.runTool(req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

func (f *fakeAgent) Archive(ctx context.Context, req *connect.Request[hutchagent.ArchiveRequest], stream *connect.ServerStream[hutchagent.ArchiveResponse]) error {
	if f.archive == nil {
		return f.UnimplementedAgentHandler.Archive(ctx, req, stream)
	}
	return f.archive(req.Msg, func(b []byte) error { return stream.Send(&hutchagent.ArchiveResponse{Data: b}) })
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

// serveAgent serves f and returns a client of it.
func serveAgent(t *testing.T, f *fakeAgent) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(hutchagentconnect.NewAgentHandler(f))
	return serve(t, mux)
}

func startedEvent(pid uint32) *hutchagent.Event {
	return &hutchagent.Event{Event: &hutchagent.Event_Started{Started: &hutchagent.Started{Pid: pid}}}
}

func stdout(s string) *hutchagent.Event {
	return &hutchagent.Event{Event: &hutchagent.Event_Output{Output: &hutchagent.Output{Data: &hutchagent.Output_Stdout{Stdout: []byte(s)}}}}
}

func stderr(s string) *hutchagent.Event {
	return &hutchagent.Event{Event: &hutchagent.Event_Output{Output: &hutchagent.Output{Data: &hutchagent.Output_Stderr{Stderr: []byte(s)}}}}
}

func exited(x *hutchagent.Exited) *hutchagent.Event {
	return &hutchagent.Event{Event: &hutchagent.Event_Exited{Exited: x}}
}

var keepalive = &hutchagent.Event{Event: &hutchagent.Event_Keepalive{Keepalive: &hutchagent.KeepAlive{}}}

// sendAll sends events in order.
func sendAll(send func(*hutchagent.Event) error, events ...*hutchagent.Event) error {
	for _, ev := range events {
		if err := send(ev); err != nil {
			return err
		}
	}
	return nil
}

func TestConnectErrors(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			boom := connect.NewError(tt.code, errors.New("boom"))
			c := serveAgent(t, &fakeAgent{
				signal: func(*hutchagent.SignalRequest) error { return boom },
				start: func(_ *hutchagent.StartRequest, send func(*hutchagent.Event) error) error {
					if err := sendAll(send, startedEvent(1), stdout("x")); err != nil {
						return err
					}
					return boom
				},
				replay: func(*hutchagent.ReplayRequest, func(*hutchagent.Event) error) error { return boom },
			})
			check := func(what string, err error) {
				t.Helper()
				if errdefs.Kind(err) != tt.kind || err == nil || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("%s: %v (kind %v), want kind %v with %q", what, err, errdefs.Kind(err), tt.kind, tt.msg)
				}
				if tt.kind != nil {
					if msg, ok := errdefs.UserMessage(err); !ok || msg != tt.msg {
						t.Errorf("%s: user message %q, want %q", what, msg, tt.msg)
					}
				}
			}
			check("unary", c.Signal(t.Context(), Pid(1), syscall.SIGTERM))
			_, err := c.Replay(t.Context(), "t", true)
			check("refused stream", err)

			exe, err := c.Start(t.Context(), Command{Argv: []string{"x"}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = exe.Close() }()
			if ev, err := exe.Recv(); err != nil || string(ev.Data) != "x" {
				t.Errorf("first event %+v, %v", ev, err)
			}
			_, err = exe.Recv()
			check("stream", err)
		})
	}
}

func TestTransportErrors(t *testing.T) {
	t.Parallel()
	c := New(func(context.Context) (net.Conn, error) { return nil, errors.New("no route to agent") })
	if err := c.Health(t.Context()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Health: %v", err)
	}
	if _, err := c.Start(t.Context(), Command{Argv: []string{"true"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Start: %v", err)
	}
	if _, err := c.Processes(t.Context()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Processes: %v", err)
	}
	if _, err := c.ReadFile(t.Context(), "x", ""); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("ReadFile: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Health(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Health with a canceled context: %v", err)
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	grace := uint32(0)
	tests := []struct {
		name   string
		cmd    Command
		want   *hutchagent.StartRequest
		events []*hutchagent.Event
		// what Recv returns, in order, then the error of the last call
		out     []Event
		lastErr error
	}{{
		name: "output and exit",
		cmd:  Command{Argv: []string{"/bin/sh", "-c", "x"}, Env: map[string]string{"A": "1"}, Cwd: "/w", User: "root"},
		want: &hutchagent.StartRequest{Command: &hutchagent.Command{Argv: []string{"/bin/sh", "-c", "x"}, Env: map[string]string{"A": "1"}, Cwd: "/w", User: "root"}},
		events: []*hutchagent.Event{startedEvent(7), stdout("out"), keepalive, stderr("err"),
			exited(&hutchagent.Exited{ExitCode: 3, Exited: true, Status: "exit status 3"})},
		out: []Event{{Stream: Stdout, Data: []byte("out")}, {Stream: Stderr, Data: []byte("err")},
			{Exit: &ExitStatus{Code: 3, Exited: true, Status: "exit status 3"}}},
		lastErr: io.EOF,
	}, {
		name: "timeout, grace, stdin, tag and kept output",
		cmd: Command{Argv: []string{"cat"}, Stdin: []byte{}, Tag: "t", Timeout: 1500 * time.Millisecond,
			KillGrace: -1, KeepOutput: 100},
		want: &hutchagent.StartRequest{Command: &hutchagent.Command{Argv: []string{"cat"}}, Stdin: []byte{}, Tag: "t",
			TimeoutMs: 1500, KillGraceMs: &grace, KeepOutputBytes: 100},
		events: []*hutchagent.Event{startedEvent(7),
			exited(&hutchagent.Exited{ExitCode: -1, Signal: 15, TimedOut: true, Status: "signal: terminated"})},
		out:     []Event{{Exit: &ExitStatus{Code: -1, Signal: syscall.SIGTERM, TimedOut: true, Status: "signal: terminated"}}},
		lastErr: io.EOF,
	}, {
		name:    "cut short",
		cmd:     Command{Argv: []string{"x"}},
		want:    &hutchagent.StartRequest{Command: &hutchagent.Command{Argv: []string{"x"}}},
		events:  []*hutchagent.Event{startedEvent(7), stdout("a")},
		out:     []Event{{Stream: Stdout, Data: []byte("a")}},
		lastErr: errdefs.ErrUnavailable,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan *hutchagent.StartRequest, 1)
			c := serveAgent(t, &fakeAgent{start: func(req *hutchagent.StartRequest, send func(*hutchagent.Event) error) error {
				got <- req
				return sendAll(send, tt.events...)
			}})
			exe, err := c.Start(t.Context(), tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = exe.Close() }()
			if req := <-got; req.String() != tt.want.String() || (req.Stdin == nil) != (tt.want.Stdin == nil) {
				t.Errorf("request\n%v\nwant\n%v", req, tt.want)
			}
			if exe.Pid != 7 {
				t.Errorf("pid %d", exe.Pid)
			}
			for _, want := range tt.out {
				ev, err := exe.Recv()
				if err != nil {
					t.Fatalf("Recv: %v, want %+v", err, want)
				}
				if ev.Stream != want.Stream || string(ev.Data) != string(want.Data) || (ev.Exit == nil) != (want.Exit == nil) || ev.Exit != nil && *ev.Exit != *want.Exit {
					t.Errorf("event %+v (exit %+v), want %+v (exit %+v)", ev, ev.Exit, want, want.Exit)
				}
			}
			if _, err := exe.Recv(); !errors.Is(err, tt.lastErr) {
				t.Errorf("last Recv: %v, want %v", err, tt.lastErr)
			}
		})
	}
}

func TestStartRefused(t *testing.T) {
	t.Parallel()
	c := serveAgent(t, &fakeAgent{start: func(_ *hutchagent.StartRequest, send func(*hutchagent.Event) error) error {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("working directory /nope: no such file or directory"))
	}})
	if _, err := c.Start(t.Context(), Command{Argv: []string{"x"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Start = %v", err)
	}
	silent := serveAgent(t, &fakeAgent{start: func(*hutchagent.StartRequest, func(*hutchagent.Event) error) error { return nil }})
	if _, err := silent.Start(t.Context(), Command{Argv: []string{"x"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Start without a start event = %v", err)
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		follow  bool
		lastErr error
	}{
		{name: "tail of a running command ends", lastErr: io.EOF},
		{name: "follow cut short", follow: true, lastErr: errdefs.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := serveAgent(t, &fakeAgent{replay: func(req *hutchagent.ReplayRequest, send func(*hutchagent.Event) error) error {
				if req.GetTag() != "web" || req.GetFollow() != tt.follow {
					return connect.NewError(connect.CodeInvalidArgument, errors.New(req.String()))
				}
				return sendAll(send, startedEvent(3), stdout("log"))
			}})
			logs, err := c.Replay(t.Context(), "web", tt.follow)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = logs.Close() }()
			if ev, err := logs.Recv(); err != nil || string(ev.Data) != "log" || logs.Pid != 3 {
				t.Errorf("Recv = %+v, %v (pid %d)", ev, err, logs.Pid)
			}
			if _, err := logs.Recv(); !errors.Is(err, tt.lastErr) {
				t.Errorf("last Recv: %v, want %v", err, tt.lastErr)
			}
		})
	}
}

func TestSignal(t *testing.T) {
	t.Parallel()
	got := make(chan *hutchagent.SignalRequest, 2)
	c := serveAgent(t, &fakeAgent{signal: func(req *hutchagent.SignalRequest) error {
		got <- req
		return nil
	}})
	if err := c.Signal(t.Context(), Pid(12), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.GetPid() != 12 || req.GetSignal() != 9 {
		t.Errorf("request %v", req)
	}
	if err := c.Signal(t.Context(), Tag("web"), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.GetTag() != "web" || req.GetSignal() != 1 {
		t.Errorf("request %v", req)
	}
}

func TestRunTool(t *testing.T) {
	t.Parallel()
	c := serveAgent(t, &fakeAgent{runTool: func(req *hutchagent.RunToolRequest) (*hutchagent.RunToolResponse, error) {
		if req.GetName() == "fail" {
			return &hutchagent.RunToolResponse{Error: &hutchagent.ToolError{Kind: tools.KindNotFound, Message: "x: not there"}}, nil
		}
		return &hutchagent.RunToolResponse{Result: []byte(`{"cwd":"` + req.GetCwd() + `","user":"` + req.GetUser() + `","args":` + string(req.GetArgs()) + `}`)}, nil
	}})
	res, err := c.RunTool(t.Context(), "ok", []byte(`{"a":1}`), "/w", "root")
	if err != nil || string(res) != `{"cwd":"/w","user":"root","args":{"a":1}}` {
		t.Errorf("RunTool = %s, %v", res, err)
	}
	_, err = c.RunTool(t.Context(), "fail", []byte(`{}`), "", "")
	var failed *tools.Error
	if !errors.As(err, &failed) || failed.Kind != tools.KindNotFound || failed.Message != "x: not there" {
		t.Errorf("RunTool failing = %v", err)
	}
}

func TestArchive(t *testing.T) {
	t.Parallel()
	c := serveAgent(t, &fakeAgent{archive: func(req *hutchagent.ArchiveRequest, send func([]byte) error) error {
		switch req.GetPath() {
		case "missing":
			return connect.NewError(connect.CodeNotFound, errors.New("missing: no such file or directory"))
		case "cut":
			if err := send([]byte("part")); err != nil {
				return err
			}
			return errors.New("disk read error")
		}
		for _, chunk := range []string{"a", "bc", "def"} {
			if err := send([]byte(chunk)); err != nil {
				return err
			}
		}
		return nil
	}})
	read := func(path string) (string, error) {
		rc, err := c.Archive(t.Context(), path, tools.FormatZip, "")
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if got, err := read("dir"); err != nil || got != "abcdef" {
		t.Errorf("whole archive = %q, %v", got, err)
	}
	if _, err := read("missing"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing = %v", err)
	}
	if got, err := read("cut"); err == nil || got != "part" || !strings.Contains(err.Error(), "disk read error") {
		t.Errorf("cut archive = %q, %v: its reader must fail", got, err)
	}
}

// fakeFilesystem answers Stat with entry, or fails with err.
type fakeFilesystem struct {
	filesystemconnect.UnimplementedFilesystemHandler
	entry  *filesystem.EntryInfo
	header chan http.Header
}

func (f *fakeFilesystem) Stat(_ context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	f.header <- req.Header()
	if req.Msg.GetPath() != f.entry.GetPath() {
		return nil, connect.NewError(connect.CodeNotFound, errors.New(req.Msg.GetPath()+": no such file or directory"))
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: f.entry}), nil
}

func TestStat(t *testing.T) {
	t.Parallel()
	modified := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	target := "../x"
	f := &fakeFilesystem{
		entry: &filesystem.EntryInfo{Name: "l", Type: filesystem.FileType_FILE_TYPE_SYMLINK, Path: "/home/user/l", Size: 4,
			Mode: 0o777, Permissions: "Lrwxrwxrwx", Owner: "user", Group: "user", ModifiedTime: timestamppb.New(modified), SymlinkTarget: &target},
		header: make(chan http.Header, 2),
	}
	mux := http.NewServeMux()
	mux.Handle(filesystemconnect.NewFilesystemHandler(f))
	c := serve(t, mux)

	e, err := c.Stat(t.Context(), "/home/user/l", "root")
	want := Entry{Name: "l", Path: "/home/user/l", Type: FileSymlink, Size: 4, Mode: 0o777, Permissions: "Lrwxrwxrwx",
		Owner: "user", Group: "user", ModifiedAt: modified, SymlinkTarget: "../x"}
	if err != nil || e != want {
		t.Errorf("Stat = %+v, %v; want %+v", e, err, want)
	}
	if h := <-f.header; h.Get("Authorization") != "Basic cm9vdDo=" {
		t.Errorf("user header %q", h.Get("Authorization"))
	}
	if _, err := c.Stat(t.Context(), "/nope", ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat of a missing path = %v", err)
	}
	if h := <-f.header; h.Get("Authorization") != "" {
		t.Errorf("the default user sent %q", h.Get("Authorization"))
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
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
	c := serve(t, mux)

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

// A call the connection ends (Connect reports a reset connection as
// canceled) is Unavailable; one the caller canceled keeps the context's
// error.
func TestCanceledByWhom(t *testing.T) {
	t.Parallel()
	reset := connect.NewError(connect.CodeCanceled, errors.New("read: connection reset by peer"))
	done, cancel := context.WithCancel(t.Context())
	cancel()
	late, cancelLate := context.WithDeadline(t.Context(), time.Now())
	t.Cleanup(cancelLate)
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{name: "connection reset", ctx: t.Context(), err: reset, want: errdefs.ErrUnavailable},
		{name: "caller canceled", ctx: done, err: reset, want: context.Canceled},
		{name: "caller canceled, plain", ctx: done, err: context.Canceled, want: context.Canceled},
		{name: "canceled, not by the caller", ctx: t.Context(), err: context.Canceled, want: errdefs.ErrUnavailable},
		{name: "deadline", ctx: late, err: connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded), want: context.DeadlineExceeded},
		{name: "the agent's deadline, after the caller's", ctx: late, err: connect.NewError(connect.CodeDeadlineExceeded, errors.New("slow")), want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := mapError(tt.ctx, tt.err); !errors.Is(got, tt.want) {
				t.Errorf("mapError = %v, want %v", got, tt.want)
			}
		})
	}
}

// Run waits for the command's end, dropping its output; a stream that
// breaks first is its error.
func TestRun(t *testing.T) {
	t.Parallel()
	c := serveAgent(t, &fakeAgent{start: func(req *hutchagent.StartRequest, send func(*hutchagent.Event) error) error {
		if req.GetCommand().GetArgv()[0] == "broken" {
			return sendAll(send, startedEvent(1), stdout("x"))
		}
		return sendAll(send, startedEvent(1), stdout("out"), keepalive, exited(&hutchagent.Exited{ExitCode: 3, Exited: true}))
	}})
	if st, err := c.Run(t.Context(), Command{Argv: []string{"false"}}); err != nil || st.Code != 3 || !st.Exited {
		t.Errorf("Run: %+v, %v; want exit 3", st, err)
	}
	if _, err := c.Run(t.Context(), Command{Argv: []string{"broken"}}); err == nil {
		t.Error("Run of a stream that ends without an exit: no error")
	}
}
