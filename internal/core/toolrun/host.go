package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/core/exec"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Sandbox modes (tools.ModeAll, ModeSelective, ModeOff) are for hosts that
// embed Hutch as their agent's executor. In mode off every tool call runs
// on the host, in Config.HostDir; in selective only the calls tools.Risky
// finds risky go to the sandbox. Both are refused unless the daemon was
// given a host directory, and every call on the host is logged as a
// warning: no sandbox isolates it.
//
// What a call on the host reaches is still bounded, since the daemon runs
// as root and the call is a model's choice, whoever's key asked for it
// (tenant key → host in docs/security.md). The file tools are the daemon's
// own code, confined to the directory (tools.Files.Confined: os.Root, no
// absolute path out of it, no "..", no symlink out, no foreign hard link),
// and what they make belongs to the host user. A command runs as the host
// user (ResolveHostUser: never root, no supplementary groups), with
// no_new_privs so that no setuid program (sudo) gives root back, in the
// directory, with nothing of the daemon's environment. A command is not
// confined to the directory: it reads what the host user may read, which
// is what a sandbox is for.

// toolOnHost says whether call runs on the host, and why a selective call
// went to the sandbox.
func (s *Service) toolOnHost(call Call) (onHost bool, why string, err error) {
	mode := call.Mode
	if mode == "" {
		mode = s.mode
	}
	switch mode {
	case tools.ModeAll:
		return false, "", nil
	case tools.ModeSelective, tools.ModeOff:
	default:
		return false, "", errdefs.InvalidArgument("mode must be %s, %s or %s, got %q", tools.ModeAll, tools.ModeSelective, tools.ModeOff, mode)
	}
	if s.hostDir == "" {
		return false, "", errdefs.FailedPrecondition("mode %s runs tool calls on the host, outside any sandbox, which this daemon does not allow: "+
			"start it with --tools-host-dir DIR (trusted local development only), or use mode %s", mode, tools.ModeAll)
	}
	if s.hostUserErr != nil {
		return false, "", errdefs.FailedPrecondition("mode %s runs tool calls on the host, as an unprivileged user, and this daemon has none: %v", mode, s.hostUserErr)
	}
	if mode == tools.ModeOff {
		return true, "", nil
	}
	risky, why := tools.Risky(call.Name, call.Args, s.hostDir)
	return !risky, why, nil
}

// hostEnv is the whole environment of a command run on the host: none of
// the daemon's own (which may hold secrets).
var hostEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}

// runOnHost runs a tool call on the host, in the host tools directory.
func (s *Service) runOnHost(ctx context.Context, call Call, out exec.Output) (Outcome, error) {
	s.log.Warn("tool call on the host, outside any sandbox", "tool", call.Name, "dir", s.hostDir, "uid", s.hostUser.UID)
	switch call.Name {
	case tools.RunCommand:
		return commandTool(call.Args, out, nil, func(a runCommandArgs, timeout time.Duration, capture exec.Output) (exec.Result, error) {
			return hostCommand(ctx, s.hostDir, s.hostUser, a, timeout, capture)
		})
	case tools.DownloadURL:
		return toolFailure(tools.KindBlockedByPolicy, "%s serves a sandbox's files; in mode %s no call runs in one", call.Name, tools.ModeOff), nil
	case tools.RunCode:
		return toolFailure(tools.KindBlockedByPolicy, "%s runs code in a sandbox's kernel; in mode %s no call runs in one", call.Name, tools.ModeOff), nil
	}
	files := tools.Files{Dir: s.hostDir, UID: s.hostUser.UID, GID: s.hostUser.GID, Confined: true}
	res, err := files.Run(call.Name, call.Args)
	var failed *tools.Error
	if errors.As(err, &failed) {
		return Outcome{Error: failed}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	result, err := json.Marshal(res)
	return Outcome{Result: result}, err
}

// errCwdOutside is a command's cwd out of the host directory.
var errCwdOutside = errors.New("cwd is out of the tools directory")

// hostCommand runs a command with bash on the host, as u, in dir (or its
// cwd, which must be in dir), in its own process group, killed whole at
// its timeout.
func hostCommand(ctx context.Context, dir string, u HostUser, a runCommandArgs, timeout time.Duration, capture exec.Output) (exec.Result, error) {
	home := dir
	if a.Cwd != "" {
		cwd, err := cwdIn(dir, a.Cwd)
		if err != nil {
			kind := tools.KindInvalidArgument
			if errors.Is(err, errCwdOutside) {
				kind = tools.KindBlockedByPolicy
			}
			return exec.Result{}, &tools.Error{Kind: kind, Message: err.Error()}
		}
		dir = cwd
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// #nosec G204 -- mode off or selective: the daemon's owner let calls run on the host (--tools-host-dir), as u
	cmd := osexec.CommandContext(ctx, "/bin/bash", "-c", a.Command)
	cmd.Dir, cmd.Env = dir, append(hostEnv, "HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		// No supplementary groups: the host user's own (docker, sudo,
		// adm) are not for a model's commands.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}} // #nosec G115 -- ids from ResolveHostUser, not negative
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdout, cmd.Stderr = outputWriter{exec.Stdout, capture}, outputWriter{exec.Stderr, capture}
	began := time.Now()
	if err := startNoNewPrivs(cmd); err != nil {
		return exec.Result{}, &tools.Error{Kind: tools.KindFailed, Message: fmt.Sprintf("start the command on the host as %s: %v", u, err)}
	}
	err := cmd.Wait()
	res := exec.Result{Duration: time.Since(began)}
	var ee *osexec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.TimedOut, res.KilledBy, res.ExitCode = true, "timeout", -1
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if res.ExitCode < 0 {
			res.KilledBy = "signal"
		}
	case err != nil:
		return exec.Result{}, err
	}
	return res, nil
}

// outputWriter is an io.Writer into an Output stream.
type outputWriter struct {
	stream exec.Stream
	out    exec.Output
}

func (w outputWriter) Write(p []byte) (int, error) {
	if err := w.out(w.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// cwdIn is a command's cwd, relative to dir or absolute, as a directory
// in dir: one that is out of it, by its spelling or through a symlink, is
// refused. (It only chooses where the command starts: the command may cd
// wherever its user may.)
func cwdIn(dir, cwd string) (string, error) {
	if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(dir, cwd)
	}
	cwd = filepath.Clean(cwd)
	rel, err := filepath.Rel(dir, cwd)
	if err != nil || rel != "." && !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s: %w", cwd, errCwdOutside)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer func() { _ = root.Close() }() // only read
	fi, err := root.Stat(rel)
	switch {
	case err != nil && strings.Contains(err.Error(), "path escapes"):
		return "", fmt.Errorf("%s: %w", cwd, errCwdOutside)
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("cwd %s is not a directory", cwd)
	}
	return cwd, nil
}

// startNoNewPrivs starts cmd with no_new_privs set, so that neither it nor
// its children gain privileges through exec (a setuid sudo, file
// capabilities). os/exec has no such option; the flag is a thread's, and a
// child inherits it from the thread that forks it, so every such command
// is started from one thread that has it (noNewPrivsThread).
func startNoNewPrivs(cmd *osexec.Cmd) error {
	req := startRequest{cmd: cmd, done: make(chan error, 1)}
	noNewPrivsStarts() <- req
	return <-req.done
}

type startRequest struct {
	cmd  *osexec.Cmd
	done chan error
}

// noNewPrivsStarts is where startNoNewPrivs sends its commands, to a
// goroutine made on first use that runs for as long as the process does.
var noNewPrivsStarts = sync.OnceValue(func() chan<- startRequest {
	starts := make(chan startRequest)
	go noNewPrivsThread(starts)
	return starts
})

// noNewPrivsThread locks itself to its thread, sets no_new_privs on it,
// and starts the commands it is sent. It never returns nor unlocks: no
// other goroutine may run on a thread that has the flag, and the thread
// must not end, since a child that an earlier goroutine forked from it
// with a parent-death signal (Pdeathsig) would get that signal.
func noNewPrivsThread(starts <-chan startRequest) {
	runtime.LockOSThread()
	err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	if err != nil {
		err = fmt.Errorf("set no_new_privs: %w", err)
	}
	for req := range starts {
		if err != nil {
			req.done <- err
			continue
		}
		req.done <- req.cmd.Start()
	}
}
