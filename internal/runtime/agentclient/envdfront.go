package agentclient

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// EnvdFront serves envd's process and filesystem services (Connect, JSON
// or binary) by passing each call on to the agent of the sandbox it is
// for, which serves them itself, with what a daemon adds: a started
// command's environment (the sandbox's, its secrets) under the call's,
// its output redacted, and no environments in process lists. It is for a
// front that speaks envd's protocol to E2B's SDKs (internal/front/e2b), and
// keeps the agent's protobuf types in this package.
type EnvdFront struct {
	// Target holds the sandbox a call is for (its context says which)
	// running, until Release.
	Target func(ctx context.Context) (EnvdTarget, error)
	// Redactor, when not nil, makes a redactor of one output stream.
	Redactor func() StreamRedactor
}

// EnvdTarget is the sandbox a call is for, held running.
type EnvdTarget struct {
	Agent *Client
	// Env is the environment a command started with own gets.
	Env     func(ctx context.Context, own map[string]string) (map[string]string, error)
	Release func()
}

// StreamRedactor redacts a stream that comes in chunks (a
// redact.Stream): Next what can go out of a chunk now, End the rest.
type StreamRedactor interface {
	Next(chunk []byte) []byte
	End() []byte
}

// Handler serves the two services.
func (f *EnvdFront) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(envdProcess{f: f}))
	mux.Handle(filesystemconnect.NewFilesystemHandler(envdFilesystem{f: f}))
	return mux
}

// target holds the call's sandbox, its errors as Connect's.
func (f *EnvdFront) target(ctx context.Context) (EnvdTarget, error) {
	t, err := f.Target(ctx)
	if err != nil {
		return EnvdTarget{}, connectError(err)
	}
	return t, nil
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
func forward[Req, Res any](ctx context.Context, f *EnvdFront, req *connect.Request[Req],
	call func(envdClients) func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error),
) (*connect.Response[Res], error) {
	t, err := f.target(ctx)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	out := connect.NewRequest(req.Msg)
	copyUser(out.Header(), req.Header())
	return call(t.Agent.envd())(ctx, out)
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
	f *EnvdFront
}

// Start starts a command with the sandbox's environment (its secrets
// too) under the call's, and streams its events, output redacted.
func (p envdProcess) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	t, err := p.f.target(ctx)
	if err != nil {
		return err
	}
	defer t.Release()
	msg := req.Msg
	if msg.Process == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process is required"))
	}
	env, err := t.Env(ctx, msg.Process.Envs)
	if err != nil {
		return connectError(err)
	}
	msg.Process.Envs = env
	out := connect.NewRequest(msg)
	copyUser(out.Header(), req.Header())
	in, err := t.Agent.envd().Process.Start(ctx, out)
	if err != nil {
		return err
	}
	return relayEvents(in, stream, func(ev *process.ProcessEvent) *process.StartResponse { return &process.StartResponse{Event: ev} }, p.f.outputRedactor())
}

// Connect streams the events of a running process, output redacted.
func (p envdProcess) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	t, err := p.f.target(ctx)
	if err != nil {
		return err
	}
	defer t.Release()
	out := connect.NewRequest(req.Msg)
	copyUser(out.Header(), req.Header())
	in, err := t.Agent.envd().Process.Connect(ctx, out)
	if err != nil {
		return err
	}
	return relayEvents(in, stream, func(ev *process.ProcessEvent) *process.ConnectResponse { return &process.ConnectResponse{Event: ev} }, p.f.outputRedactor())
}

// relayEvents sends a process's events from in to stream, until in ends,
// its output redacted by red; wrap makes a message of an event, for what
// red held back until the end.
func relayEvents[Res any, P interface {
	*Res
	GetEvent() *process.ProcessEvent
}](in *connect.ServerStreamForClient[Res], stream *connect.ServerStream[Res], wrap func(*process.ProcessEvent) P, red *outputRedactor) error {
	defer func() { _ = in.Close() }()
	for in.Receive() {
		ev := P(in.Msg())
		for _, held := range red.event(ev.GetEvent()) {
			if err := stream.Send(wrap(held)); err != nil {
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
	res, err := forward(ctx, p.f, req, func(e envdClients) func(context.Context, *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
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
	return forward(ctx, p.f, req, func(e envdClients) func(context.Context, *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
		return e.Process.SendInput
	})
}

func (p envdProcess) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	return forward(ctx, p.f, req, func(e envdClients) func(context.Context, *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
		return e.Process.SendSignal
	})
}

func (p envdProcess) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	return forward(ctx, p.f, req, func(e envdClients) func(context.Context, *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
		return e.Process.Update
	})
}

func (p envdProcess) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	return forward(ctx, p.f, req, func(e envdClients) func(context.Context, *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
		return e.Process.CloseStdin
	})
}

// envdFilesystem is envd's filesystem service, passed on as it is.
type envdFilesystem struct {
	filesystemconnect.UnimplementedFilesystemHandler
	f *EnvdFront
}

func (fs envdFilesystem) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	return forward(ctx, fs.f, req, func(e envdClients) func(context.Context, *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
		return e.Filesystem.Stat
	})
}

func (fs envdFilesystem) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	return forward(ctx, fs.f, req, func(e envdClients) func(context.Context, *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
		return e.Filesystem.MakeDir
	})
}

func (fs envdFilesystem) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	return forward(ctx, fs.f, req, func(e envdClients) func(context.Context, *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
		return e.Filesystem.Move
	})
}

func (fs envdFilesystem) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	return forward(ctx, fs.f, req, func(e envdClients) func(context.Context, *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
		return e.Filesystem.ListDir
	})
}

func (fs envdFilesystem) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	return forward(ctx, fs.f, req, func(e envdClients) func(context.Context, *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
		return e.Filesystem.Remove
	})
}

// WatchDir streams the agent's events as they come.
func (fs envdFilesystem) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	t, err := fs.f.target(ctx)
	if err != nil {
		return err
	}
	defer t.Release()
	out := connect.NewRequest(req.Msg)
	copyUser(out.Header(), req.Header())
	in, err := t.Agent.envd().Filesystem.WatchDir(ctx, out)
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
	stdout, stderr, pty StreamRedactor
}

func (f *EnvdFront) outputRedactor() *outputRedactor {
	if f.Redactor == nil {
		return nil
	}
	return &outputRedactor{stdout: f.Redactor(), stderr: f.Redactor(), pty: f.Redactor()}
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
