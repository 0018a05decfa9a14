package e2b

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/secrets/redact"
)

// envd's API on the front (port 49983): the agent serves envd's process
// and filesystem services and /files itself, and the front passes the
// SDK's calls on to it, holding the sandbox meanwhile (a call wakes it and
// is activity), with what the daemon adds to Hutch's own calls: a
// process's environment is the sandbox's, its secrets included, under
// what the call gives; and no secret's value leaves, in a command's
// output, a process list or a file read.

// held is the sandbox a call is for, held running.
type held struct {
	run     *sandbox.Running
	envd    agentclient.Envd
	release func()
}

type sandboxKey struct{}

// sandboxOf is the id of the sandbox a front request is for (routed).
func sandboxOf(ctx context.Context) string { s, _ := ctx.Value(sandboxKey{}).(string); return s }

// hold holds the call's sandbox running.
func (f *Front) hold(ctx context.Context) (*held, error) {
	r, release, err := f.cfg.Manager.Acquire(ctx, sandboxOf(ctx))
	if err != nil {
		return nil, connectError(err)
	}
	return &held{run: r, envd: r.Agent().Envd(), release: release}, nil
}

// connectError is err as a Connect error the SDK maps (E2B-COMPAT.md §3).
func connectError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	switch errdefs.Kind(err) {
	case errdefs.ErrNotFound:
		code = connect.CodeNotFound
	case errdefs.ErrInvalidArgument:
		code = connect.CodeInvalidArgument
	case errdefs.ErrFailedPrecondition, errdefs.ErrConflict:
		code = connect.CodeFailedPrecondition
	case errdefs.ErrUnavailable:
		code = connect.CodeUnavailable
	case errdefs.ErrResourceExhausted:
		code = connect.CodeResourceExhausted
	}
	if errors.Is(err, context.Canceled) {
		code = connect.CodeCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		code = connect.CodeDeadlineExceeded
	}
	msg, _ := errdefs.UserMessage(err)
	if msg == "" {
		msg = err.Error()
	}
	return connect.NewError(code, errors.New(msg))
}

// forward is a unary call passed on to the agent as it came (its user
// header too).
func forward[Req, Res any](ctx context.Context, f *Front, req *connect.Request[Req],
	call func(agentclient.Envd) func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error),
) (*connect.Response[Res], error) {
	h, err := f.hold(ctx)
	if err != nil {
		return nil, err
	}
	defer h.release()
	out := connect.NewRequest(req.Msg)
	copyUser(out.Header(), req.Header())
	return call(h.envd)(ctx, out)
}

// copyUser passes on the header that names the sandbox user a call acts
// as (envd's Basic authorization).
func copyUser(dst, src http.Header) {
	if a := src.Get("Authorization"); a != "" {
		dst.Set("Authorization", a)
	}
}

// envdProcess is envd's process service.
type envdProcess struct {
	processconnect.UnimplementedProcessHandler
	f *Front
}

// Start starts a command with the sandbox's environment (its secrets
// too) under the call's, and streams its events, output redacted.
func (p envdProcess) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	h, err := p.f.hold(ctx)
	if err != nil {
		return err
	}
	defer h.release()
	msg := req.Msg
	if msg.Process == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process is required"))
	}
	env, err := h.run.CommandEnv(ctx, "", msg.Process.Envs)
	if err != nil {
		return connectError(err)
	}
	msg.Process.Envs = env
	out := connect.NewRequest(msg)
	copyUser(out.Header(), req.Header())
	in, err := h.envd.Process.Start(ctx, out)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	red := p.f.redactor(h.run)
	for in.Receive() {
		ev := in.Msg()
		for _, held := range red.event(ev.Event) {
			if err := stream.Send(&process.StartResponse{Event: held}); err != nil {
				return err
			}
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return in.Err()
}

// Connect streams the events of a running process, output redacted.
func (p envdProcess) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	h, err := p.f.hold(ctx)
	if err != nil {
		return err
	}
	defer h.release()
	out := connect.NewRequest(req.Msg)
	copyUser(out.Header(), req.Header())
	in, err := h.envd.Process.Connect(ctx, out)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	red := p.f.redactor(h.run)
	for in.Receive() {
		ev := in.Msg()
		for _, held := range red.event(ev.Event) {
			if err := stream.Send(&process.ConnectResponse{Event: held}); err != nil {
				return err
			}
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return in.Err()
}

// List lists the processes without their environments, which hold the
// sandbox's secrets.
func (p envdProcess) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	res, err := forward(ctx, p.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
		return e.Process.List
	})
	if err != nil {
		return nil, err
	}
	for _, pi := range res.Msg.Processes {
		if pi.Config != nil {
			pi.Config.Envs = nil
		}
	}
	return res, nil
}

func (p envdProcess) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	return forward(ctx, p.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
		return e.Process.SendInput
	})
}

func (p envdProcess) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	return forward(ctx, p.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
		return e.Process.SendSignal
	})
}

func (p envdProcess) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return forward(ctx, p.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
		return e.Process.Update
	})
}

func (p envdProcess) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	return forward(ctx, p.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
		return e.Process.CloseStdin
	})
}

// envdFilesystem is envd's filesystem service, passed on as it is.
type envdFilesystem struct {
	filesystemconnect.UnimplementedFilesystemHandler
	f *Front
}

func (fs envdFilesystem) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	return forward(ctx, fs.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
		return e.Filesystem.Stat
	})
}

func (fs envdFilesystem) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	return forward(ctx, fs.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
		return e.Filesystem.MakeDir
	})
}

func (fs envdFilesystem) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	return forward(ctx, fs.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
		return e.Filesystem.Move
	})
}

func (fs envdFilesystem) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	return forward(ctx, fs.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
		return e.Filesystem.ListDir
	})
}

func (fs envdFilesystem) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	return forward(ctx, fs.f, req, func(e agentclient.Envd) func(context.Context, *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
		return e.Filesystem.Remove
	})
}

// WatchDir streams the agent's events as they come.
func (fs envdFilesystem) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	h, err := fs.f.hold(ctx)
	if err != nil {
		return err
	}
	defer h.release()
	out := connect.NewRequest(req.Msg)
	copyUser(out.Header(), req.Header())
	in, err := h.envd.Filesystem.WatchDir(ctx, out)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	for in.Receive() {
		if err := stream.Send(in.Msg()); err != nil {
			return err
		}
	}
	return in.Err()
}

// outputRedactor redacts a process's output, each stream apart (a value
// split across two chunks of one stream is still found).
type outputRedactor struct {
	stdout, stderr, pty *redact.Stream
}

func (f *Front) redactor(*sandbox.Running) *outputRedactor {
	if f.cfg.Redactor == nil {
		return nil
	}
	return &outputRedactor{stdout: f.cfg.Redactor.Stream(), stderr: f.cfg.Redactor.Stream(), pty: f.cfg.Redactor.Stream()}
}

// event redacts ev's output in place. Before the end event, it returns
// the data events of what the streams held back (the start of what could
// have been a secret), to be sent first.
func (o *outputRedactor) event(ev *process.ProcessEvent) []*process.ProcessEvent {
	if o == nil || ev == nil {
		return nil
	}
	if ev.GetEnd() != nil {
		var rest []*process.ProcessEvent
		add := func(d *process.ProcessEvent_DataEvent) {
			rest = append(rest, &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}})
		}
		if b := o.stdout.End(); len(b) > 0 {
			add(&process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: b}})
		}
		if b := o.stderr.End(); len(b) > 0 {
			add(&process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: b}})
		}
		if b := o.pty.End(); len(b) > 0 {
			add(&process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: b}})
		}
		return rest
	}
	d := ev.GetData()
	if d == nil {
		return nil
	}
	switch out := d.Output.(type) {
	case *process.ProcessEvent_DataEvent_Stdout:
		out.Stdout = o.stdout.Next(out.Stdout)
	case *process.ProcessEvent_DataEvent_Stderr:
		out.Stderr = o.stderr.Next(out.Stderr)
	case *process.ProcessEvent_DataEvent_Pty:
		out.Pty = o.pty.Next(out.Pty)
	}
	return nil
}

// serveFiles passes envd's /files on to the agent: a read's content
// redacted (asked for uncompressed: a compressed body cannot be), a write
// as it comes.
func (f *Front) serveFiles(w http.ResponseWriter, r *http.Request) {
	h, err := f.hold(r.Context())
	if err != nil {
		writeEnvdError(w, http.StatusBadGateway, err)
		return
	}
	defer h.release()
	target, _ := url.Parse(agentclient.BaseURL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Accept-Encoding")
			pr.Out.Header.Del("X-Access-Token")
		},
		Transport:     h.envd.HTTP,
		FlushInterval: -1,
		ModifyResponse: func(res *http.Response) error {
			if r.Method != http.MethodGet || res.StatusCode != http.StatusOK || f.cfg.Redactor == nil {
				return nil
			}
			res.Body = &redactingReader{src: res.Body, st: f.cfg.Redactor.Stream()}
			res.ContentLength = -1
			res.Header.Del("Content-Length")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeEnvdError(w, http.StatusBadGateway, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// redactingReader is src's content, redacted.
type redactingReader struct {
	src io.ReadCloser
	st  *redact.Stream
	buf []byte // redacted, not read yet
	eof bool
}

func (r *redactingReader) Read(p []byte) (int, error) {
	chunk := make([]byte, 32<<10)
	for len(r.buf) == 0 && !r.eof {
		n, err := r.src.Read(chunk)
		r.buf = append(r.buf, r.st.Next(chunk[:n])...)
		if errors.Is(err, io.EOF) {
			r.buf, r.eof = append(r.buf, r.st.End()...), true
		} else if err != nil {
			return 0, err
		}
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *redactingReader) Close() error { return r.src.Close() }

// writeEnvdError answers an envd HTTP route's error as envd does.
func writeEnvdError(w http.ResponseWriter, status int, err error) {
	msg, _ := errdefs.UserMessage(err)
	if msg == "" {
		msg = err.Error()
	}
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}
