package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/tools"
)

// Sandbox modes (tools.ModeAll, ModeSelective, ModeOff) are for hosts that
// embed Hutch as their agent's executor. In mode off every tool call runs
// on the host, in Config.HostDir, as the daemon's user; in selective only
// the calls tools.Risky finds risky go to the sandbox. Both are refused
// unless the daemon was given a host directory, and every call on the host
// is logged as a warning: nothing isolates it.

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
func (s *Service) runOnHost(ctx context.Context, call Call, out sandbox.Output) (Outcome, error) {
	s.log.Warn("tool call on the host, outside any sandbox", "tool", call.Name, "dir", s.hostDir)
	switch call.Name {
	case tools.RunCommand:
		return commandTool(call.Args, out, nil, func(a runCommandArgs, timeout time.Duration, capture sandbox.Output) (sandbox.ExecResult, error) {
			return hostCommand(ctx, s.hostDir, a, timeout, capture)
		})
	case tools.DownloadURL:
		return toolFailure(tools.KindBlockedByPolicy, "%s serves a sandbox's files; in mode %s no call runs in one", call.Name, tools.ModeOff), nil
	case tools.RunCode:
		return toolFailure(tools.KindBlockedByPolicy, "%s runs code in a sandbox's kernel; in mode %s no call runs in one", call.Name, tools.ModeOff), nil
	}
	files := tools.Files{Dir: s.hostDir, UID: os.Getuid(), GID: os.Getgid()}
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

// hostCommand runs a command with bash on the host, in its own process
// group, killed whole at its timeout.
func hostCommand(ctx context.Context, dir string, a runCommandArgs, timeout time.Duration, capture sandbox.Output) (sandbox.ExecResult, error) {
	if a.Cwd != "" {
		if !filepath.IsAbs(a.Cwd) {
			a.Cwd = filepath.Join(dir, a.Cwd)
		}
		dir = a.Cwd
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// #nosec G204 -- mode off or selective: the daemon's owner let calls run on the host (--tools-host-dir)
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", a.Command)
	cmd.Dir, cmd.Env = dir, append(hostEnv, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdout, cmd.Stderr = outputWriter{sandbox.Stdout, capture}, outputWriter{sandbox.Stderr, capture}
	began := time.Now()
	err := cmd.Run()
	res := sandbox.ExecResult{Duration: time.Since(began)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.TimedOut, res.KilledBy, res.ExitCode = true, "timeout", -1
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if res.ExitCode < 0 {
			res.KilledBy = "signal"
		}
	case err != nil:
		return sandbox.ExecResult{}, err
	}
	return res, nil
}

// outputWriter is an io.Writer into an Output stream.
type outputWriter struct {
	stream sandbox.Stream
	out    sandbox.Output
}

func (w outputWriter) Write(p []byte) (int, error) {
	if err := w.out(w.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
