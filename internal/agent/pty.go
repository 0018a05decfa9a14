package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
)

// Terminals. A command started with envd's pty gets a new pseudo-terminal
// of the agent's /dev/pts, which is the sandbox's own devpts instance: its
// slave is the command's stdin, stdout and stderr and its controlling
// terminal (see shimRequest.TTY); the agent keeps the master, reads what
// the command writes from it (DataEvent pty), writes input to it, and sets
// its size. The terminal lives as long as some process holds the slave.
//
// Why x/sys/unix and not github.com/creack/pty: creack/pty's ioctls go
// through (*os.File).Fd, which puts the master in blocking mode, off the
// Go poller: a read would then hold an OS thread (which the sandbox's pids
// limit counts) and writes could not be given up on when their caller
// goes away. Opening a terminal is four system calls.

// defaultTerm is TERM for a command with a terminal whose request sets
// none: what terminals in use today emulate.
const defaultTerm = "xterm-256color"

// openTerminal opens a new terminal of the given size for a command run
// as acct: the slave, three times, as the command's stdio, and the master,
// as its output and, through a second descriptor that closeStdin may close
// on its own, its input.
func openTerminal(size unix.Winsize, acct account) (s stdio, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return s, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("open a terminal: /dev/ptmx: %w", err))
	}
	// Non-blocking, so the os.File is the poller's.
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	s.outputs = []*outputPipe{newOutputPipe(master, outPty)}
	s.pty = master
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	slave, err := openSlave(fd, size)
	if err != nil {
		return s, connect.NewError(connect.CodeInternal, fmt.Errorf("open a terminal: %w", err))
	}
	s.theirs = [3]*os.File{slave, slave, slave}
	// The slave's owner may write to it (mesg, write and a few others
	// check), as login(1) leaves it; the command has it open anyway.
	_ = slave.Chown(int(acct.UID), -1)
	_ = slave.Chmod(0o620)
	in, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return s, connect.NewError(connect.CodeInternal, fmt.Errorf("open a terminal: duplicate its master: %w", err))
	}
	s.stdin = os.NewFile(uintptr(in), "/dev/ptmx")
	return s, nil
}

// openSlave unlocks the slave of master, sizes it and opens it.
func openSlave(master int, size unix.Winsize) (*os.File, error) {
	n, err := unix.IoctlGetUint32(master, unix.TIOCGPTN)
	if err != nil {
		return nil, fmt.Errorf("TIOCGPTN: %w", err)
	}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return nil, fmt.Errorf("unlock: %w", err)
	}
	if err := unix.IoctlSetWinsize(master, unix.TIOCSWINSZ, &size); err != nil {
		return nil, fmt.Errorf("set its size: %w", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// terminalSize checks a size envd's pty gives.
func terminalSize(size *process.PTY_Size) (*unix.Winsize, error) {
	cols, rows := size.GetCols(), size.GetRows()
	if cols == 0 || rows == 0 || cols > 0xffff || rows > 0xffff {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a terminal's size is 1 to 65535 columns and rows, got %dx%d", cols, rows))
	}
	return &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}, nil // #nosec G115 -- checked just above
}

// resize sets the size of the command's terminal; the kernel tells its
// foreground process group with SIGWINCH.
func (c *command) resize(size *unix.Winsize) error {
	if c.pty == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal to resize", c.pid))
	}
	raw, err := c.pty.SyscallConn()
	if err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the terminal of process %d is closed", c.pid))
	}
	var ioctlErr error
	if err := raw.Control(func(fd uintptr) { ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, size) }); err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the terminal of process %d is closed", c.pid))
	}
	if ioctlErr != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("resize the terminal of process %d: %w", c.pid, ioctlErr))
	}
	return nil
}

// writeInput writes envd's input to the command: stdin to its stdin, pty
// to its terminal.
func writeInput(ctx context.Context, c *command, in *process.ProcessInput) error {
	switch v := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		if c.pty != nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has a terminal: send its input as pty", c.pid))
		}
		return c.writeStdin(ctx, v.Stdin)
	case *process.ProcessInput_Pty:
		if c.pty == nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal: send its input as stdin", c.pid))
		}
		return c.writeStdin(ctx, v.Pty)
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input is empty"))
	}
}
