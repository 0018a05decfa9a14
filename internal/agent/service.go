package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent/hutchagentconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
)

// archiveChunk is the most archive data one ArchiveResponse carries.
const archiveChunk = 32 << 10

// agentService implements hutch.agent.v1.Agent (api/agent/v1/agent.proto):
// Hutch's own calls, over the same processes and files as envd's services.
type agentService struct {
	srv *server
}

var _ hutchagentconnect.AgentHandler = (*agentService)(nil)

func (a *agentService) Health(context.Context, *connect.Request[hutchagent.HealthRequest]) (*connect.Response[hutchagent.HealthResponse], error) {
	return connect.NewResponse(&hutchagent.HealthResponse{}), nil
}

func (a *agentService) Start(ctx context.Context, req *connect.Request[hutchagent.StartRequest], stream *connect.ServerStream[hutchagent.Event]) error {
	msg := req.Msg
	cmd := msg.GetCommand()
	argv := cmd.GetArgv()
	if len(argv) == 0 || argv[0] == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("command.argv must name a program"))
	}
	acct, err := a.srv.lookupUser(cmd.GetUser())
	if err != nil {
		return err
	}
	start := startRequest{
		acct: acct,
		// envd's shape, which List reports.
		config:    &process.ProcessConfig{Cmd: argv[0], Args: argv[1:], Envs: cmd.GetEnv(), Cwd: &cmd.Cwd},
		stdin:     msg.Stdin != nil || msg.GetStdinOpen(),
		input:     msg.Stdin,
		stdinOpen: msg.GetStdinOpen(),
		timeout:   time.Duration(msg.GetTimeoutMs()) * time.Millisecond,
		grace:     defaultKillGrace,
		keep:      int(msg.GetKeepOutputBytes()),
	}
	if msg.KillGraceMs != nil {
		start.grace = time.Duration(msg.GetKillGraceMs()) * time.Millisecond
	}
	if msg.GetTag() != "" {
		start.tag = &msg.Tag
	}
	return a.srv.procs.start(ctx, start, sendEvents(stream))
}

func (a *agentService) Replay(ctx context.Context, req *connect.Request[hutchagent.ReplayRequest], stream *connect.ServerStream[hutchagent.Event]) error {
	if req.Msg.GetTag() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("a replay names its process's tag"))
	}
	return a.srv.procs.replay(ctx, req.Msg.GetTag(), req.Msg.GetFollow(), sendEvents(stream))
}

func (a *agentService) Signal(_ context.Context, req *connect.Request[hutchagent.SignalRequest]) (*connect.Response[hutchagent.SignalResponse], error) {
	var sel process.ProcessSelector
	switch s := req.Msg.GetProcess().(type) {
	case *hutchagent.SignalRequest_Pid:
		sel.Selector = &process.ProcessSelector_Pid{Pid: s.Pid}
	case *hutchagent.SignalRequest_Tag:
		sel.Selector = &process.ProcessSelector_Tag{Tag: s.Tag}
	}
	if err := a.srv.procs.signal(&sel, syscall.Signal(req.Msg.GetSignal())); err != nil {
		return nil, err
	}
	return connect.NewResponse(&hutchagent.SignalResponse{}), nil
}

func (a *agentService) ReclaimMemory(context.Context, *connect.Request[hutchagent.ReclaimMemoryRequest]) (*connect.Response[hutchagent.ReclaimMemoryResponse], error) {
	v, err := reclaimMemory()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	if v.pid != 0 {
		a.srv.log.Warn("process killed: the sandbox is out of memory", "pid", v.pid, "name", v.name, "rss_bytes", v.rss)
	}
	return connect.NewResponse(&hutchagent.ReclaimMemoryResponse{
		Pid: uint32(v.pid), Name: v.name, RssBytes: v.rss, // #nosec G115 -- a pid
	}), nil
}

func (a *agentService) RunTool(_ context.Context, req *connect.Request[hutchagent.RunToolRequest]) (*connect.Response[hutchagent.RunToolResponse], error) {
	acct, err := a.srv.lookupUser(req.Msg.GetUser())
	if err != nil {
		return nil, err
	}
	dir := req.Msg.GetCwd()
	if dir != "" {
		if dir, err = resolvePath(dir, acct); err != nil {
			return nil, err
		}
	}
	result, failed := a.srv.runTool(req.Msg.GetName(), req.Msg.GetArgs(), dir, acct)
	res := &hutchagent.RunToolResponse{Result: result}
	if failed != nil {
		res.Error = &hutchagent.ToolError{Kind: failed.Kind, Message: failed.Message}
	}
	return connect.NewResponse(res), nil
}

func (a *agentService) Archive(_ context.Context, req *connect.Request[hutchagent.ArchiveRequest], stream *connect.ServerStream[hutchagent.ArchiveResponse]) error {
	acct, err := a.srv.lookupUser(req.Msg.GetUser())
	if err != nil {
		return err
	}
	// Send copies the chunk into its message before it returns: the
	// buffer's memory can be reused.
	w := bufio.NewWriterSize(chunkWriter(func(p []byte) error {
		return stream.Send(&hutchagent.ArchiveResponse{Data: p})
	}), archiveChunk)
	if err := a.srv.archive(w, req.Msg.GetPath(), req.Msg.GetFormat(), acct); err != nil {
		return err
	}
	return w.Flush()
}

// chunkWriter sends each write whole.
type chunkWriter func(p []byte) error

func (f chunkWriter) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ io.Writer = chunkWriter(nil)

// sendEvents sends a command's events to a stream of Hutch's service.
func sendEvents(stream *connect.ServerStream[hutchagent.Event]) sendFunc {
	return func(c *command, ev *process.ProcessEvent) error {
		return stream.Send(agentEvent(c, ev))
	}
}

// agentEvent is envd's event ev of command c in Hutch's shape.
func agentEvent(c *command, ev *process.ProcessEvent) *hutchagent.Event {
	switch e := ev.GetEvent().(type) {
	case *process.ProcessEvent_Start:
		return &hutchagent.Event{Event: &hutchagent.Event_Started{Started: &hutchagent.Started{Pid: e.Start.GetPid()}}}
	case *process.ProcessEvent_Data:
		var out hutchagent.Output
		switch d := e.Data.GetOutput().(type) {
		case *process.ProcessEvent_DataEvent_Stdout:
			out.Data = &hutchagent.Output_Stdout{Stdout: d.Stdout}
		case *process.ProcessEvent_DataEvent_Stderr:
			out.Data = &hutchagent.Output_Stderr{Stderr: d.Stderr}
		}
		return &hutchagent.Event{Event: &hutchagent.Event_Output{Output: &out}}
	case *process.ProcessEvent_End:
		sig, core := c.exit()
		return &hutchagent.Event{Event: &hutchagent.Event_Exited{Exited: &hutchagent.Exited{
			ExitCode:   e.End.GetExitCode(),
			Exited:     e.End.GetExited(),
			Signal:     uint32(sig), // #nosec G115 -- a signal number is 1..64
			CoreDumped: core,
			TimedOut:   e.End.GetError() == "timeout",
			Status:     e.End.GetStatus(),
		}}}
	default:
		return &hutchagent.Event{Event: &hutchagent.Event_Keepalive{Keepalive: &hutchagent.KeepAlive{}}}
	}
}
