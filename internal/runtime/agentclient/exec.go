package agentclient

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Command is a command for the agent to start.
type Command struct {
	// Argv is the program (looked up in PATH when it has no slash) and its
	// arguments.
	Argv []string
	// Env is added to the agent's environment, over it.
	Env map[string]string
	// Cwd is the working directory; "" is the user's home.
	Cwd  string
	User string
	// Stdin is what the command reads on its stdin, then EOF; the agent
	// writes it beside the command's output. nil gives it /dev/null.
	Stdin []byte
	// StdinOpen keeps stdin open after Stdin (a pipe, also when Stdin is
	// nil): Input writes to it, CloseInput ends it.
	StdinOpen bool
	// Tag names the command, unique among the running ones: Signal and
	// Replay find it by it. "" for none.
	Tag string
	// Timeout, when not 0, has the agent end the command that long after
	// its start: SIGTERM, then after KillGrace SIGKILL to its whole
	// process tree. Its ExitStatus then says TimedOut.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL at the timeout: 0
	// means the agent's default (2 s), a negative value SIGKILL at once.
	KillGrace time.Duration
	// KeepOutput, when not 0 (at most 4 MiB, and with a Tag), has the agent
	// keep that many bytes of the command's latest output, also after it
	// ended, until the tag's next start: Replay sends them. These are a
	// background process's logs.
	KeepOutput int
}

// Stream names an output stream of a command.
type Stream int

const (
	Stdout Stream = iota + 1
	Stderr
)

// Event is one thing a started command did: wrote Data to Stream, or, in
// the last event, ended (Exit is set).
type Event struct {
	Stream Stream
	Data   []byte
	Exit   *ExitStatus
}

// ExitStatus is how a command's main process ended.
type ExitStatus struct {
	// Code is the exit code when Exited, else -1.
	Code int
	// Exited says the command exited by itself.
	Exited bool
	// Signal is the signal that ended it when it did not exit (0 when the
	// agent lost its status).
	Signal     syscall.Signal
	CoreDumped bool
	// TimedOut says the agent ended it at its Command.Timeout.
	TimedOut bool
	// Status says it as Go's os.ProcessState does: "exit status 1",
	// "signal: killed".
	Status string
}

// Execution is the stream of a started command's events (Start), or of a
// tag's kept output (Replay). It is not safe for concurrent use.
type Execution struct {
	// Pid is the command's main process in the sandbox.
	Pid uint32

	stream *connect.ServerStreamForClient[hutchagent.Event]
	// endless: the stream may end without an Exited event (a Replay
	// without follow of a command that still runs).
	endless bool
	done    bool
	// exited: the Exited event came; the stream ends right after it.
	exited bool
	cancel context.CancelFunc // of the stream's context
}

// Run starts cmd and waits for it to end, its output dropped.
func (c *Client) Run(ctx context.Context, cmd Command) (ExitStatus, error) {
	exe, err := c.Start(ctx, cmd)
	if err != nil {
		return ExitStatus{}, err
	}
	defer func() { _ = exe.Close() }()
	for {
		ev, err := exe.Recv()
		switch {
		case err != nil:
			return ExitStatus{}, err
		case ev.Exit != nil:
			return *ev.Exit, nil
		}
	}
}

// Start starts cmd and returns once the agent reports it running, with its
// pid; its events follow through Recv. ctx bounds the stream, not the
// command: a command whose stream ends runs on until it exits, its timeout,
// or Signal ends it. Invalid commands (no program, a program or working
// directory that is not there, an unknown user) are InvalidArgument; a
// running command with the same Tag is AlreadyExists.
func (c *Client) Start(ctx context.Context, cmd Command) (*Execution, error) {
	req := &hutchagent.StartRequest{
		Command:   &hutchagent.Command{Argv: cmd.Argv, Env: cmd.Env, Cwd: cmd.Cwd, User: cmd.User},
		Stdin:     cmd.Stdin,
		Tag:       cmd.Tag,
		StdinOpen: cmd.StdinOpen,
	}
	if cmd.Timeout > 0 {
		req.TimeoutMs = millis(cmd.Timeout)
		switch {
		case cmd.KillGrace < 0:
			req.KillGraceMs = new(uint32)
		case cmd.KillGrace > 0:
			grace := millis(cmd.KillGrace)
			req.KillGraceMs = &grace
		}
	}
	if cmd.KeepOutput > 0 {
		req.KeepOutputBytes = uint32(min(cmd.KeepOutput, 1<<30)) // #nosec G115 -- bounded; the agent takes at most 4 MiB
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.agent.Start(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, err
	}
	return started(stream, false, cancel)
}

// Replay streams the output the agent keeps for tag (Command.KeepOutput) of
// the latest command started with it, running or not: what was kept, then,
// with follow, what it writes next and its ExitStatus; without follow, its
// ExitStatus if it has ended, and no more. A tag with no output kept is
// NotFound.
func (c *Client) Replay(ctx context.Context, tag string, follow bool) (*Execution, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.agent.Replay(ctx, connect.NewRequest(&hutchagent.ReplayRequest{Tag: tag, Follow: follow}))
	if err != nil {
		cancel()
		return nil, err
	}
	return started(stream, !follow, cancel)
}

// started reads a stream's Started event, which comes first; the agent's
// refusal comes instead of it.
func started(stream *connect.ServerStreamForClient[hutchagent.Event], endless bool, cancel context.CancelFunc) (*Execution, error) {
	for stream.Receive() {
		if s := stream.Msg().GetStarted(); s != nil {
			return &Execution{Pid: s.GetPid(), stream: stream, endless: endless, cancel: cancel}, nil
		}
	}
	defer cancel()
	_ = stream.Close()
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, errdefs.Unavailable("agent unavailable: it ended the stream before the command started")
}

// Recv returns the command's next event: its output as it comes, then its
// ExitStatus. After that event, or at the end of a Replay without follow,
// it returns io.EOF. A stream that ends otherwise (the agent or the
// connection went away) is an Unavailable error; the context's end is its
// error.
func (e *Execution) Recv() (Event, error) {
	if e.done {
		return Event{}, io.EOF
	}
	for e.stream.Receive() {
		switch ev := e.stream.Msg().GetEvent().(type) {
		case *hutchagent.Event_Output:
			if data := ev.Output.GetStdout(); data != nil {
				return Event{Stream: Stdout, Data: data}, nil
			}
			if data := ev.Output.GetStderr(); data != nil {
				return Event{Stream: Stderr, Data: data}, nil
			}
		case *hutchagent.Event_Exited:
			e.done, e.exited = true, true
			x := ev.Exited
			return Event{Exit: &ExitStatus{
				Code:       int(x.GetExitCode()),
				Exited:     x.GetExited(),
				Signal:     syscall.Signal(x.GetSignal()),
				CoreDumped: x.GetCoreDumped(),
				TimedOut:   x.GetTimedOut(),
				Status:     x.GetStatus(),
			}}, nil
		}
	}
	e.done = true
	if err := e.stream.Err(); err != nil {
		return Event{}, err
	}
	if e.endless {
		return Event{}, io.EOF
	}
	return Event{}, errdefs.Unavailable("agent unavailable: it ended the stream of process %d before its end", e.Pid)
}

// Close stops reading the stream; it does not stop the command.
func (e *Execution) Close() error {
	e.done = true
	defer e.cancel()
	if e.exited {
		// Read the stream's end, which follows its last event at once:
		// a stream read to its end leaves its connection to the agent
		// for the next call, where one cut short closes it (a new
		// connection costs ~0.5 ms under gVisor). An agent that does not
		// end it is not waited for long.
		t := time.AfterFunc(time.Second, e.cancel)
		for e.stream.Receive() {
		}
		t.Stop()
	}
	if err := e.stream.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Selector names a command the agent started: by the pid of its main
// process, or by its tag.
type Selector struct {
	Pid uint32
	Tag string
}

// Pid selects a command by its main process's pid.
func Pid(pid uint32) Selector { return Selector{Pid: pid} }

// Tag selects a command by its tag.
func Tag(tag string) Selector { return Selector{Tag: tag} }

// Signal signals the running command p names. SIGKILL kills its main
// process and every process of its tree, also of a command whose main
// process ended but left processes behind, and returns once they are
// dead; SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2 and SIGTERM go to its main
// process only, and other signals are InvalidArgument. SIGTERM to a
// command whose main process ended goes to every process it left behind.
// Signal 0 sends nothing: it asks whether anything of the command is left,
// its main process or what that left behind. No such command is NotFound.
func (c *Client) Signal(ctx context.Context, p Selector, sig syscall.Signal) error {
	req := &hutchagent.SignalRequest{Signal: uint32(sig)} // #nosec G115 -- the agent refuses what it does not know
	if p.Tag != "" {
		req.Process = &hutchagent.SignalRequest_Tag{Tag: p.Tag}
	} else {
		req.Process = &hutchagent.SignalRequest_Pid{Pid: p.Pid}
	}
	_, err := c.agent.Signal(ctx, connect.NewRequest(req))
	return err
}

// Reclaimed is the process ReclaimMemory killed.
type Reclaimed struct {
	Pid      uint32
	Name     string
	RSSBytes uint64
}

// ReclaimMemory has the agent kill the process holding the most memory,
// as a kernel's OOM killer would; a zero Reclaimed when there was none to
// kill.
func (c *Client) ReclaimMemory(ctx context.Context) (Reclaimed, error) {
	res, err := c.agent.ReclaimMemory(ctx, connect.NewRequest(&hutchagent.ReclaimMemoryRequest{}))
	if err != nil {
		return Reclaimed{}, err
	}
	return Reclaimed{Pid: res.Msg.GetPid(), Name: res.Msg.GetName(), RSSBytes: res.Msg.GetRssBytes()}, nil
}

// Input writes data to the stdin of the running command p names, which
// was started with StdinOpen (else FailedPrecondition); no such command is
// NotFound.
func (c *Client) Input(ctx context.Context, p Selector, data []byte) error {
	req := &process.SendInputRequest{Process: p.envd(), Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data}}}
	_, err := c.process.SendInput(ctx, connect.NewRequest(req))
	return err
}

// CloseInput ends the stdin of the running command p names: it reads EOF.
func (c *Client) CloseInput(ctx context.Context, p Selector) error {
	_, err := c.process.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: p.envd()}))
	return err
}

// envd is p as envd's process service names a process.
func (p Selector) envd() *process.ProcessSelector {
	if p.Tag != "" {
		return &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: p.Tag}}
	}
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: p.Pid}}
}

// Process is a command the agent started that runs.
type Process struct {
	Pid  uint32
	Tag  string
	Argv []string
	Cwd  string // as it was asked for
}

// Processes lists the commands the agent started whose main process runs,
// by pid.
func (c *Client) Processes(ctx context.Context) ([]Process, error) {
	res, err := c.process.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		return nil, err
	}
	out := make([]Process, 0, len(res.Msg.GetProcesses()))
	for _, p := range res.Msg.GetProcesses() {
		cfg := p.GetConfig()
		out = append(out, Process{
			Pid:  p.GetPid(),
			Tag:  p.GetTag(),
			Argv: append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
			Cwd:  cfg.GetCwd(),
		})
	}
	return out, nil
}

// millis is d in whole milliseconds for the wire, at least 1.
func millis(d time.Duration) uint32 {
	return uint32(min(max(d.Milliseconds(), 1), 1<<32-1)) // #nosec G115 -- bounded
}
