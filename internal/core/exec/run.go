package exec

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"go.opentelemetry.io/otel/attribute"
)

// Exec bounds.
const (
	DefaultTimeout = 180 * time.Second
	MaxTimeout     = 1800 * time.Second
)

// Request is a command to run in a sandbox.
type Request struct {
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

// Result is how a command ended.
type Result struct {
	ExitCode int
	Duration time.Duration
	TimedOut bool
	// KilledBy is "" when the command exited by itself, "oom" (the memory
	// limit), "timeout", "signal", or "pids": it failed while forks were
	// refused at the process limit (runc only; see Blame).
	KilledBy string
}

// Argv is the command's argv: Cmd, or Command run by /bin/sh -c. Giving
// neither or both is an InvalidArgument.
func (r Request) Argv() ([]string, error) {
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

// Validate says what is wrong with the command, as Run would: a service
// checks a command before it wakes a sandbox for it.
func (r Request) Validate() error {
	_, _, err := r.check()
	return err
}

// check checks a command and returns its argv and timeout.
func (r Request) check() (argv []string, timeout time.Duration, err error) {
	if argv, err = r.Argv(); err != nil {
		return nil, 0, err
	}
	switch timeout = r.Timeout; {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < 0 || timeout > MaxTimeout:
		return nil, 0, errdefs.InvalidArgument("timeout_s must be between 1 and %d", int(MaxTimeout.Seconds()))
	}
	for k := range r.Env {
		if !rootfs.ValidEnvName(k) {
			return nil, 0, errdefs.InvalidArgument("env name %q is not a valid variable name", k)
		}
	}
	return argv, timeout, nil
}

// Run runs a command in the sandbox r holds, sending its output to out as
// it comes, and returns how it ended. The command's whole process tree is
// killed when it times out, when out fails, or when ctx ends (the caller
// went away). A Timeout of zero is DefaultTimeout. A failed command is
// put down to a limit its sandbox hit meanwhile (see Blame).
func Run(ctx context.Context, r *core.Running, req Request, out Output) (res Result, err error) {
	ctx, span := spans.Start(ctx, "exec", spans.Sandbox.String(r.ID()))
	defer func() {
		span.SetAttributes(attribute.Int("process.exit.code", res.ExitCode), attribute.String("hutch.killed_by", res.KilledBy))
		spans.End(span, err)
	}()
	argv, timeout, err := req.check()
	if err != nil {
		return Result{}, err
	}
	cwd := rootfs.Workspace
	if req.Cwd != "" {
		cwd = rootfs.WorkspacePath(req.Cwd)
	}
	env, err := r.CommandEnv(ctx, req.ForUser, req.Env)
	if err != nil {
		return Result{}, r.Err(ctx, err)
	}
	cmd := agentclient.Command{Argv: argv, Env: env, Cwd: cwd, User: rootfs.UserOr(req.User), Timeout: timeout}
	if req.Stdin != nil {
		cmd.Stdin = []byte(*req.Stdin)
	}

	began := time.Now()
	// The stream's own context: ending it must not be what kills the
	// command (the agent keeps commands whose caller left), so the kill is
	// explicit below.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	agent := r.Agent()
	exe, err := agent.Start(sctx, cmd)
	if err != nil {
		return Result{}, r.Err(ctx, err)
	}
	defer func() { _ = exe.Close() }() // the result is already decided

	kill := func() {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer kcancel()
		// The agent kills the whole tree.
		if err := agent.Signal(kctx, agentclient.Pid(exe.Pid), syscall.SIGKILL); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			r.Logger().Warn("kill command", attrSandbox, r.ID(), "pid", exe.Pid, "error", err)
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
				return Result{}, ctx.Err()
			}
			return Result{}, r.Lost(ctx, fmt.Errorf("exec in sandbox %s: %w", r.ID(), err))
		}
		if ev.Exit != nil {
			res := ResultOf(*ev.Exit, time.Since(began))
			if res.ExitCode != 0 && res.KilledBy != "timeout" {
				if prev, now, err := r.LimitHits(ctx); err == nil {
					res.Blame(prev, now)
				}
			}
			return res, nil
		}
		if err := deliver(out, ev); err != nil {
			kill()
			return Result{}, r.Err(ctx, err)
		}
	}
}

// deliver sends a command's output event to out.
func deliver(out Output, ev agentclient.Event) error {
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
func ResultOf(e agentclient.ExitStatus, d time.Duration) Result {
	r := Result{ExitCode: e.Code, Duration: d}
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

// What a command's Result puts its end down to, besides a timeout and a
// signal: the sandbox's limits.
const (
	KilledByOOM  = "oom"
	KilledByPids = "pids"
)

// Blame puts a failed command down to a limit its sandbox hit between the
// counts prev and now: "oom" when it ended as an OOM kill ends (see
// killedForMemory); else "pids" when a fork was refused at the process
// limit, which kills nothing but makes commands fail. (With commands
// ending at once, one may take the blame for another's hit; the counts
// tell that one happened.) The exit code stays what the command's shell
// saw.
func (r *Result) Blame(prev, now backend.LimitHits) {
	switch {
	case r.killedForMemory(prev, now):
		r.KilledBy = KilledByOOM
	case r.KilledBy == "" && now.PidsMax > prev.PidsMax:
		r.KilledBy = KilledByPids
	}
}

// killedForMemory reports whether the command ended as an OOM kill of it
// (or of its shell's child) ends: 137 (SIGKILL) with a kill counted; or,
// where the backend says an OOM kill may end a process with a failed page
// fault (LimitHits.OOMMayFault), 139 or 135 (SIGSEGV, SIGBUS) with a kill
// counted or the memory limit reached.
func (r *Result) killedForMemory(prev, now backend.LimitHits) bool {
	switch r.ExitCode {
	case 128 + int(syscall.SIGKILL):
		return now.OOMKills > prev.OOMKills
	case 128 + int(syscall.SIGSEGV), 128 + int(syscall.SIGBUS):
		return now.OOMMayFault && (now.OOMKills > prev.OOMKills || now.MemoryFull > prev.MemoryFull)
	}
	return false
}
