package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// MaxTerminalSize bounds a terminal's columns and rows.
const MaxTerminalSize = 10000

// TerminalRequest is an interactive session to open in a sandbox: a
// command with a terminal, or with pipes, whose input comes as it is
// typed.
type TerminalRequest struct {
	// Command is a command line the user's login shell runs (-c); "" runs
	// the login shell itself, as a login shell.
	Command string
	Cwd     string // default: the workspace
	Env     map[string]string
	User    string // default: the sandbox user
	// ForUser is the product's user it runs for (see
	// Request).
	ForUser string
	// TTY gives the command a terminal of Cols columns and Rows rows;
	// without, its stdin, stdout and stderr are pipes.
	TTY        bool
	Cols, Rows int
}

func (r TerminalRequest) validate() error {
	if r.TTY && (r.Cols < 1 || r.Rows < 1 || r.Cols > MaxTerminalSize || r.Rows > MaxTerminalSize) {
		return errdefs.InvalidArgument("a terminal has 1 to %d columns and rows, got %dx%d", MaxTerminalSize, r.Cols, r.Rows)
	}
	for k := range r.Env {
		if !rootfs.ValidEnvName(k) {
			return errdefs.InvalidArgument("env name %q is not a valid variable name", k)
		}
	}
	return nil
}

// TerminalEvent is what a session's command did: wrote Data (to Stream,
// Stdout or Stderr, without a terminal; "" with one, whose
// output is one stream), or, in the last event, ended.
type TerminalEvent struct {
	Stream Stream
	Data   []byte
	Exit   *TerminalExit
}

// TerminalExit is how a session's command ended: as an exec's, and the
// name of the signal that killed it, if one did ("SIGKILL").
type TerminalExit struct {
	Result
	Signal string
}

// Terminal is an open session. It holds its sandbox running (which counts
// as activity, and keeps the idle timer away) until Close, which kills
// what is left of its command. Recv and Close are called by one goroutine;
// the others by any, also beside Recv.
type Terminal struct {
	// Pid is the command's main process in the sandbox.
	Pid uint32

	release func()
	session *agentclient.Session
	tty     bool
	began   time.Time
	ended   atomic.Bool
}

// OpenTerminal starts a session in sandbox id, waking it if need be. ctx
// bounds the session: its end stops the stream (Close kills the command).
func (s *Service) OpenTerminal(ctx context.Context, id string, req TerminalRequest) (*Terminal, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := s.openTerminal(ctx, r, req)
	if err != nil {
		err = r.Err(ctx, err)
		release()
		return nil, err
	}
	t.release = release
	return t, nil
}

func (s *Service) openTerminal(ctx context.Context, r *core.Running, req TerminalRequest) (*Terminal, error) {
	env, err := r.CommandEnv(ctx, req.ForUser, req.Env)
	if err != nil {
		return nil, err
	}
	cwd := rootfs.Workspace
	if req.Cwd != "" {
		cwd = rootfs.WorkspacePath(req.Cwd)
	}
	session, err := r.Agent().StartSession(ctx, agentclient.SessionCommand{
		Command: req.Command, Env: env, Cwd: cwd, User: rootfs.UserOr(req.User),
		TTY: req.TTY, Cols: req.Cols, Rows: req.Rows,
	})
	if err != nil {
		return nil, err
	}
	s.log.Debug("opened terminal", attrSandbox, r.ID(), "pid", session.Pid, "tty", req.TTY)
	return &Terminal{Pid: session.Pid, session: session, tty: req.TTY, began: time.Now()}, nil
}

// Recv returns the command's next output, then how it ended; after that,
// io.EOF.
func (t *Terminal) Recv() (TerminalEvent, error) {
	ev, err := t.session.Recv()
	if err != nil {
		return TerminalEvent{}, err
	}
	if ev.Exit != nil {
		t.ended.Store(true)
		exit := &TerminalExit{Result: ResultOf(*ev.Exit, time.Since(t.began))}
		if ev.Exit.Signal != 0 {
			exit.Signal = unix.SignalName(ev.Exit.Signal)
		}
		return TerminalEvent{Exit: exit}, nil
	}
	out := TerminalEvent{Data: ev.Data}
	switch ev.Stream {
	case agentclient.Stdout:
		out.Stream = Stdout
	case agentclient.Stderr:
		out.Stream = Stderr
	}
	return out, nil
}

// Write sends input to the command: what is typed, with a terminal.
func (t *Terminal) Write(ctx context.Context, data []byte) error {
	return t.session.Input(ctx, data)
}

// Resize sets the size of the command's terminal; it gets SIGWINCH.
func (t *Terminal) Resize(ctx context.Context, cols, rows int) error {
	if !t.tty {
		return errdefs.FailedPrecondition("the session has no terminal to resize: it was opened without one")
	}
	if cols < 1 || rows < 1 || cols > MaxTerminalSize || rows > MaxTerminalSize {
		return errdefs.InvalidArgument("a terminal has 1 to %d columns and rows, got %dx%d", MaxTerminalSize, cols, rows)
	}
	return t.session.Resize(ctx, cols, rows)
}

// CloseInput ends the command's input: its stdin reads EOF. A terminal
// stays open (the command may write on); it reads a ^D, which a shell or
// cat at the start of a line takes for the end.
func (t *Terminal) CloseInput(ctx context.Context) error {
	if t.tty {
		return t.session.Input(ctx, []byte{0x04})
	}
	return t.session.CloseInput(ctx)
}

// Signal sends the command's main process a signal by name (HUP, INT,
// QUIT, USR1, USR2, TERM, with or without SIG); KILL kills its whole
// process tree.
func (t *Terminal) Signal(ctx context.Context, name string) error {
	sig, err := parseSignal(name)
	if err != nil {
		return err
	}
	return t.session.Signal(ctx, sig)
}

// Close ends the session: it kills the command's whole process tree
// unless the command ended by itself (a dropped connection ends its
// session's processes), stops the stream and lets the sandbox go.
func (t *Terminal) Close() error {
	var err error
	if !t.ended.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = t.session.Signal(ctx, unix.SIGKILL)
		cancel()
		if errors.Is(err, errdefs.ErrNotFound) { // it ended meanwhile
			err = nil
		}
	}
	if cerr := t.session.Close(); cerr != nil && !errors.Is(cerr, io.EOF) {
		err = errors.Join(err, cerr)
	}
	t.release()
	if err != nil {
		return fmt.Errorf("close the terminal of process %d: %w", t.Pid, err)
	}
	return nil
}
