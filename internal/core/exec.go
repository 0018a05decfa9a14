package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Exec bounds.
const (
	DefaultExecTimeout = 180 * time.Second
	MaxExecTimeout     = 1800 * time.Second
)

// ExecRequest is a command to run in a sandbox.
type ExecRequest struct {
	// Exactly one of Cmd (an argv) and Command (run by /bin/sh -c).
	Cmd     []string
	Command string
	Cwd     string // default: the workspace
	Env     map[string]string
	Stdin   *string // nil: no stdin
	User    string  // default: the sandbox user
	Timeout time.Duration
	// ForUser is the product's user the command runs for: its personal
	// secrets are the command's, over its workspace's. Default: the
	// sandbox's user.
	ForUser string
}

// Stream names an output stream.
type Stream string

const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Output receives a command's output as it comes. An error stops the command.
type Output func(s Stream, data []byte) error

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int
	Duration time.Duration
	TimedOut bool
	// KilledBy is "" when the command exited by itself, "oom" (the memory
	// limit), "timeout", "signal", or "pids": it failed while forks were
	// refused at the process limit (runc only; see blameLimits).
	KilledBy string
}

// Argv is the command's argv: Cmd, or Command run by /bin/sh -c. Giving
// neither or both is an InvalidArgument.
func (r ExecRequest) Argv() ([]string, error) {
	switch {
	case len(r.Cmd) > 0 && r.Command != "":
		return nil, errdefs.InvalidArgument("give either cmd or command, not both")
	case len(r.Cmd) > 0:
		if r.Cmd[0] == "" {
			return nil, errdefs.InvalidArgument("cmd[0] must name a program")
		}
		return r.Cmd, nil
	case r.Command != "":
		return []string{"/bin/sh", "-c", r.Command}, nil
	}
	return nil, errdefs.InvalidArgument("give cmd (an argv array) or command (a shell string)")
}

// Validate says what is wrong with the command, as Running.Exec would: a
// service checks a command before it wakes a sandbox for it.
func (r ExecRequest) Validate() error {
	_, _, err := r.check()
	return err
}

// check checks a command and returns its argv and timeout.
func (r ExecRequest) check() (argv []string, timeout time.Duration, err error) {
	if argv, err = r.Argv(); err != nil {
		return nil, 0, err
	}
	switch timeout = r.Timeout; {
	case timeout == 0:
		timeout = DefaultExecTimeout
	case timeout < 0 || timeout > MaxExecTimeout:
		return nil, 0, errdefs.InvalidArgument("timeout_s must be between 1 and %d", int(MaxExecTimeout.Seconds()))
	}
	for k := range r.Env {
		if !rootfs.ValidEnvName(k) {
			return nil, 0, errdefs.InvalidArgument("env name %q is not a valid variable name", k)
		}
	}
	return argv, timeout, nil
}

// run runs a checked command in a live sandbox the caller holds (see
// acquire, and Running.Exec).
func (m *Manager) run(ctx context.Context, inst *instance, argv []string, req ExecRequest, timeout time.Duration, out Output) (ExecResult, error) {
	id := inst.id

	cwd := req.Cwd
	if cwd == "" {
		cwd = rootfs.Workspace
	} else {
		cwd = WorkspacePath(cwd)
	}
	env, err := m.commandEnv(ctx, inst, req.ForUser, req.Env)
	if err != nil {
		return ExecResult{}, err
	}
	cmd := agentclient.Command{Argv: argv, Env: env, Cwd: cwd, User: UserOr(req.User), Timeout: timeout}
	if req.Stdin != nil {
		cmd.Stdin = []byte(*req.Stdin)
	}

	began := time.Now()
	// The stream's own context: ending it must not be what kills the
	// command (the agent keeps commands whose caller left), so the kill is
	// explicit below.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	exe, err := inst.agent.Start(sctx, cmd)
	if errors.Is(err, errdefs.ErrUnavailable) {
		return ExecResult{}, m.lostAgent(ctx, inst, err)
	}
	if err != nil {
		return ExecResult{}, err
	}
	defer func() { _ = exe.Close() }() // the result is already decided

	kill := func() {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer kcancel()
		// The agent kills the whole tree.
		if err := inst.agent.Signal(kctx, agentclient.Pid(exe.Pid), syscall.SIGKILL); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			m.log.Warn("kill command", attrSandbox, id, "pid", exe.Pid, "error", err)
		}
	}
	// Stop reading when the caller goes away.
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	for {
		ev, err := exe.Recv()
		if err != nil {
			kill()
			if ctx.Err() != nil {
				return ExecResult{}, ctx.Err()
			}
			return ExecResult{}, m.lostAgent(ctx, inst, fmt.Errorf("exec in sandbox %s: %w", id, err))
		}
		if ev.Exit != nil {
			res := ResultOf(*ev.Exit, time.Since(began))
			if res.ExitCode != 0 && res.KilledBy != "timeout" {
				m.blameLimits(ctx, inst, &res)
			}
			return res, nil
		}
		if err := Deliver(out, ev); err != nil {
			kill()
			return ExecResult{}, err
		}
	}
}

// Deliver sends a command's output event to out.
func Deliver(out Output, ev agentclient.Event) error {
	switch ev.Stream {
	case agentclient.Stdout:
		return out(Stdout, ev.Data)
	case agentclient.Stderr:
		return out(Stderr, ev.Data)
	}
	return nil
}

// ResultOf is how a command that ended as e, after d, is reported: a
// timeout as 124 (what timeout(1) reports), a signal as 128 plus its
// number (what a shell reports).
func ResultOf(e agentclient.ExitStatus, d time.Duration) ExecResult {
	r := ExecResult{ExitCode: e.Code, Duration: d}
	switch {
	case e.TimedOut:
		r.TimedOut, r.KilledBy = true, "timeout"
		if r.ExitCode == 0 || r.ExitCode == -1 {
			r.ExitCode = 124
		}
	case !e.Exited && e.Signal != 0:
		r.KilledBy = "signal"
		r.ExitCode = 128 + int(e.Signal)
	}
	return r
}

// Blame puts a failed command down to a limit its sandbox hit between the
// counts prev and now: "oom" when it ended as an OOM kill ends (see
// killedForMemory); else "pids" when a fork was refused at the process
// limit, which kills nothing but makes commands fail. (With commands
// ending at once, one may take the blame for another's hit; the counts
// tell that one happened.) The exit code stays what the command's shell
// saw.
func (r *ExecResult) Blame(prev, now backend.LimitHits) {
	switch {
	case r.killedForMemory(prev, now):
		r.KilledBy = "oom"
	case r.KilledBy == "" && now.PidsMax > prev.PidsMax:
		r.KilledBy = "pids"
	}
}

// killedForMemory reports whether the command ended as an OOM kill of it
// (or of its shell's child) ends: 137 (SIGKILL) with a kill counted; or,
// where the backend says an OOM kill may end a process with a failed page
// fault (LimitHits.OOMMayFault), 139 or 135 (SIGSEGV, SIGBUS) with a kill
// counted or the memory limit reached.
func (r *ExecResult) killedForMemory(prev, now backend.LimitHits) bool {
	switch r.ExitCode {
	case 128 + int(syscall.SIGKILL):
		return now.OOMKills > prev.OOMKills
	case 128 + int(syscall.SIGSEGV), 128 + int(syscall.SIGBUS):
		return now.OOMMayFault && (now.OOMKills > prev.OOMKills || now.MemoryFull > prev.MemoryFull)
	}
	return false
}

// blameLimits blames a failed command in a live sandbox for the limits it
// hit since the last look (see ExecResult.Blame).
func (m *Manager) blameLimits(ctx context.Context, inst *instance, res *ExecResult) {
	if res.ExitCode == 128+int(syscall.SIGKILL) {
		// The daemon may be killing it for its sandbox's memory: the
		// command's end can come back before the agent's answer does,
		// which the count waits for.
		inst.reclaiming.Lock()
		//lint:ignore SA2001 the lock is taken only to wait for a reclaim under way
		inst.reclaiming.Unlock()
	}
	hits, err := inst.backend.LimitHits(ctx, inst.handle)
	if err != nil {
		m.log.Warn("read limit hits", attrSandbox, inst.id, "error", err)
		return
	}
	hits.OOMKills += inst.reclaims.Load()
	inst.mu.Lock()
	prev := inst.limitHits
	inst.limitHits = hits
	inst.mu.Unlock()
	res.Blame(prev, hits)
}

// WorkspacePath makes p absolute, relative paths meaning the workspace:
// how every call names a sandbox's files and working directories.
func WorkspacePath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(rootfs.Workspace, p)
}

// UserOr is the user a call acts as: u, or the sandbox user.
func UserOr(u string) string {
	if u == "" {
		return rootfs.UserName
	}
	return u
}

// withEnv is the sandbox's environment with a command's own over it.
func withEnv(sandbox, command map[string]string) map[string]string {
	if len(sandbox) == 0 {
		return command
	}
	env := maps.Clone(sandbox)
	maps.Copy(env, command)
	return env
}
