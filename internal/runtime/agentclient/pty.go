package agentclient

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Terminal is the Stream of a command's output through its terminal:
// stdout and stderr as the terminal shows them, one stream.
const Terminal = Stderr + 1

// SessionCommand is an interactive command for the agent to start: with
// a terminal (TTY), or with pipes for its stdin, stdout and stderr. Its
// input comes through Session.Input until it ends.
type SessionCommand struct {
	// Command is a command line the user's login shell runs (-c); ""
	// runs the login shell itself, as a login shell.
	Command string
	// Env is added to the agent's environment, over it. With a TTY, TERM
	// is xterm-256color unless Env sets it.
	Env map[string]string
	// Cwd is the working directory; "" is the user's home.
	Cwd  string
	User string
	// TTY gives the command a new terminal of Cols columns and Rows rows
	// (1 to 65535 each) as its stdin, stdout and stderr, and as its
	// controlling terminal, in a session of its own.
	TTY        bool
	Cols, Rows int
}

// Session is a command started by StartSession: its events come through
// Recv, its input goes through Input. Recv and Close are called by one
// goroutine; Input, Resize, CloseInput and Signal by any, also beside
// Recv.
type Session struct {
	// Pid is the command's main process in the sandbox.
	Pid uint32

	c      *Client
	tty    bool
	stream *connect.ServerStreamForClient[process.StartResponse]
	done   bool
}

// StartSession starts cmd through envd's process service and returns once
// the agent reports it running. ctx bounds the stream; a deadline on it is
// also the command's lifetime (connect-go sends it as Connect-Timeout-Ms,
// at which the agent, as envd, SIGKILLs the command). Cancelling ctx
// leaves the command running: Signal with SIGKILL ends it. Errors are
// Start's.
func (c *Client) StartSession(ctx context.Context, cmd SessionCommand) (*Session, error) {
	// No cmd is the agent's word for the user's login shell.
	cfg := &process.ProcessConfig{Envs: cmd.Env}
	if cmd.Command != "" {
		cfg.Args = []string{"-c", cmd.Command}
	}
	if cmd.Cwd != "" {
		cfg.Cwd = &cmd.Cwd
	}
	stdin := true
	req := &process.StartRequest{Process: cfg, Stdin: &stdin}
	if cmd.TTY {
		req.Pty = &process.PTY{Size: ptySize(cmd.Cols, cmd.Rows)}
	}
	stream, err := c.process.Start(ctx, withUser(connect.NewRequest(req), cmd.User))
	if err != nil {
		return nil, err
	}
	for stream.Receive() {
		if s := stream.Msg().GetEvent().GetStart(); s != nil {
			return &Session{Pid: s.GetPid(), c: c, tty: cmd.TTY, stream: stream}, nil
		}
	}
	_ = stream.Close()
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, errdefs.Unavailable("agent unavailable: it ended the stream before the command started")
}

// ptySize is a size for the wire; the agent refuses what is out of its
// range (the clamp only keeps a negative or huge size from wrapping).
func ptySize(cols, rows int) *process.PTY_Size {
	clamp := func(n int) uint32 { return uint32(min(max(n, 0), 1<<20)) } // #nosec G115 -- bounded
	return &process.PTY_Size{Cols: clamp(cols), Rows: clamp(rows)}
}

// Recv returns the command's next event: its output as it comes (Stream
// Terminal with a TTY, else Stdout or Stderr), then its ExitStatus; after
// that, io.EOF. A stream that ends otherwise is an Unavailable error; the
// context's end is its error.
func (s *Session) Recv() (Event, error) {
	if s.done {
		return Event{}, io.EOF
	}
	for s.stream.Receive() {
		switch ev := s.stream.Msg().GetEvent().GetEvent().(type) {
		case *process.ProcessEvent_Data:
			switch d := ev.Data.GetOutput().(type) {
			case *process.ProcessEvent_DataEvent_Pty:
				return Event{Stream: Terminal, Data: d.Pty}, nil
			case *process.ProcessEvent_DataEvent_Stdout:
				return Event{Stream: Stdout, Data: d.Stdout}, nil
			case *process.ProcessEvent_DataEvent_Stderr:
				return Event{Stream: Stderr, Data: d.Stderr}, nil
			}
		case *process.ProcessEvent_End:
			s.done = true
			return Event{Exit: exitOf(ev.End)}, nil
		}
	}
	s.done = true
	if err := s.stream.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, errdefs.Unavailable("agent unavailable: it ended the stream of process %d before its end", s.Pid)
}

// exitOf is envd's EndEvent as an ExitStatus: envd tells a signal only in
// its status text ("signal: killed"), which names it as Go does.
func exitOf(e *process.ProcessEvent_EndEvent) *ExitStatus {
	x := &ExitStatus{Code: int(e.GetExitCode()), Exited: e.GetExited(), Status: e.GetStatus(), TimedOut: e.GetError() == "timeout"}
	if name, ok := strings.CutPrefix(e.GetStatus(), "signal: "); ok && !x.Exited {
		name, x.CoreDumped = strings.CutSuffix(name, " (core dumped)")
		for sig := syscall.Signal(1); sig < 65; sig++ {
			if sig.String() == name {
				x.Signal = sig
				break
			}
		}
	}
	return x
}

// Input writes data to the command's terminal, or to its stdin.
func (s *Session) Input(ctx context.Context, data []byte) error {
	in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: data}}
	if s.tty {
		in.Input = &process.ProcessInput_Pty{Pty: data}
	}
	req := &process.SendInputRequest{Process: Pid(s.Pid).envd(), Input: in}
	_, err := s.c.process.SendInput(ctx, connect.NewRequest(req))
	return err
}

// Resize sets the size of the command's terminal; its foreground process
// group gets SIGWINCH. A command without a terminal is FailedPrecondition.
func (s *Session) Resize(ctx context.Context, cols, rows int) error {
	req := &process.UpdateRequest{Process: Pid(s.Pid).envd(), Pty: &process.PTY{Size: ptySize(cols, rows)}}
	_, err := s.c.process.Update(ctx, connect.NewRequest(req))
	return err
}

// CloseInput ends the command's stdin: it reads EOF. A terminal's input
// does not end this way (its EOF is a ^D the terminal reads).
func (s *Session) CloseInput(ctx context.Context) error { return s.c.CloseInput(ctx, Pid(s.Pid)) }

// Signal signals the command as Client.Signal does: SIGKILL kills its
// whole process tree.
func (s *Session) Signal(ctx context.Context, sig syscall.Signal) error {
	return s.c.Signal(ctx, Pid(s.Pid), sig)
}

// Close stops reading the stream; it does not stop the command.
func (s *Session) Close() error {
	s.done = true
	if err := s.stream.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
