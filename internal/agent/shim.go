package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Shim is the entry point of the hidden `hutch agent shim` command: the small
// supervisor the agent puts between itself and every command it starts, so
// that a command can be killed together with everything it left behind, also
// processes that started a new session or double-forked. It returns the exit
// code for the shim process.
//
// The agent starts it as root, as
//
//	hutch agent shim [-uid N] [-gid N] [-dir DIR] -- CMD [ARG...]
//
// and args is what follows "shim". The shim's environment is the command's,
// its fds 0, 1 and 2 are the command's stdio, and fd 3 is a unix stream socket
// to the agent. The shim makes itself a child subreaper, starts CMD with the
// given uid and gid (no supplementary groups), working directory and its own
// stdio, in a process group of its own, then closes its copies of the stdio
// (so the command's output reaches EOF when the command's last writer is
// done), and reaps every process re-parented to it until none is left, then
// exits 0.
//
// Control protocol on fd 3, shim to agent, newline-terminated text lines:
//
//	pid <n>        CMD started with pid n
//	error <text>   CMD could not be started; the shim exits 1
//	exit <status>  CMD ended; status is its raw wait(2) status in decimal
//
// followed by EOF when the shim exits. The agent writes nothing; when the
// agent's end closes (the agent died), the shim SIGKILLs all its
// descendants. SIGTERM, SIGINT and SIGHUP sent to the shim are forwarded to
// CMD while it runs.
func Shim(args []string) int {
	ctl := os.NewFile(3, "control")
	if ctl == nil {
		fmt.Fprintln(os.Stderr, "hutch agent shim: fd 3 (control socket) is not open; this command is started by the agent")
		return 2
	}
	syscall.CloseOnExec(3)
	report := func(format string, a ...any) {
		_, _ = fmt.Fprintf(ctl, format+"\n", a...)
	}
	spec, err := parseShimArgs(args)
	if err != nil {
		report("error %s", oneLine(err.Error()))
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		report("error become child subreaper: %s", oneLine(err.Error()))
		return 1
	}

	// Signals the shim handles are reset to their defaults in CMD, unlike
	// ignored ones, so CMD starts with a clean signal disposition.
	var mainPid atomic.Int64
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for sig := range sigs {
			if pid := mainPid.Load(); pid > 0 {
				_ = syscall.Kill(int(pid), sig.(syscall.Signal))
			}
		}
	}()

	pid, err := spec.start()
	if err != nil {
		report("error %s", oneLine(err.Error()))
		return 1
	}
	mainPid.Store(int64(pid))
	report("pid %d", pid)
	detachStdio()

	go func() {
		var b [64]byte
		for {
			if _, err := ctl.Read(b[:]); err != nil {
				break
			}
		}
		// The agent is gone: nobody can stop this tree any more.
		_ = killDescendants(os.Getpid(), time.Minute)
	}()

	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no child left, so no descendant either
			return 0
		}
		if got == pid {
			mainPid.Store(0)
			report("exit %d", uint32(ws))
		}
	}
}

type shimSpec struct {
	uid, gid uint32
	dir      string
	argv     []string
}

func parseShimArgs(args []string) (shimSpec, error) {
	var s shimSpec
	for len(args) > 0 {
		flag := args[0]
		if flag == "--" {
			args = args[1:]
			break
		}
		if len(args) < 2 {
			return s, fmt.Errorf("shim: flag %s needs a value", flag)
		}
		val := args[1]
		args = args[2:]
		switch flag {
		case "-uid", "-gid":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil {
				return s, fmt.Errorf("shim: bad %s %q", flag, val)
			}
			if flag == "-uid" {
				s.uid = uint32(n)
			} else {
				s.gid = uint32(n)
			}
		case "-dir":
			s.dir = val
		default:
			return s, fmt.Errorf("shim: unknown flag %s", flag)
		}
	}
	if len(args) == 0 || args[0] == "" {
		return s, errors.New("shim: no command")
	}
	s.argv = args
	return s, nil
}

// start starts the command with the shim's environment and stdio.
func (s shimSpec) start() (int, error) {
	path := s.argv[0]
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return 0, err
		}
		path = lp
	}
	pid, err := syscall.ForkExec(path, s.argv, &syscall.ProcAttr{
		Dir:   s.dir,
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid, Groups: []uint32{}},
			Setpgid:    true,
		},
	})
	if err != nil {
		return 0, fmt.Errorf("start %s as uid %d in %s: %w", s.argv[0], s.uid, s.dir, err)
	}
	return pid, nil
}

// detachStdio points fds 0, 1 and 2 at /dev/null, dropping the shim's
// references to the command's pipes.
func detachStdio() {
	null, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		// Without /dev/null, close them: EOF matters more than valid fds.
		for fd := range 3 {
			_ = syscall.Close(fd)
		}
		return
	}
	for fd := range 3 {
		_ = unix.Dup3(null, fd, 0)
	}
	_ = syscall.Close(null)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
