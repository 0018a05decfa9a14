package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/template"
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

func (r ExecRequest) argv() ([]string, error) {
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

// Exec runs a command in a sandbox, sending its output to out as it comes,
// and returns how it ended. The command's whole process tree is killed when
// it times out, when out fails, or when ctx ends (the caller went away).
func (m *Manager) Exec(ctx context.Context, id string, req ExecRequest, out Output) (ExecResult, error) {
	argv, err := req.argv()
	if err != nil {
		return ExecResult{}, err
	}
	timeout := req.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultExecTimeout
	case timeout < 0 || timeout > MaxExecTimeout:
		return ExecResult{}, errdefs.InvalidArgument("timeout_s must be between 1 and %d", int(MaxExecTimeout.Seconds()))
	}
	for k := range req.Env {
		if !template.ValidEnvName(k) {
			return ExecResult{}, errdefs.InvalidArgument("env name %q is not a valid variable name", k)
		}
	}
	inst, release, err := m.acquire(ctx, id)
	if err != nil {
		return ExecResult{}, err
	}
	defer release()
	res, err := m.run(ctx, inst, argv, req, timeout, out)
	return res, m.callErr(ctx, inst, err)
}

// run runs a checked command in a live sandbox the caller holds (see
// acquire, and Exec).
func (m *Manager) run(ctx context.Context, inst *instance, argv []string, req ExecRequest, timeout time.Duration, out Output) (ExecResult, error) {
	id := inst.id

	cwd := req.Cwd
	if cwd == "" {
		cwd = template.Workspace
	} else {
		cwd = workspacePath(cwd)
	}
	withStdin := req.Stdin != nil
	start := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: argv[0], Args: argv[1:], Envs: withEnv(inst.env, req.Env), Cwd: &cwd},
		Stdin:   &withStdin,
	})
	agentclient.WithUser(start, userOr(req.User))
	agentclient.WithTimeout(start, timeout, -1)

	began := time.Now()
	// The stream's own context: ending it must not be what kills the
	// command (the agent keeps commands whose caller left), so the kill is
	// explicit below.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stream, err := inst.agent.Process.Start(sctx, start)
	if errors.Is(err, errdefs.ErrUnavailable) {
		return ExecResult{}, m.lostAgent(ctx, inst, err)
	}
	if err != nil {
		return ExecResult{}, err
	}
	defer func() { _ = stream.Close() }() // the result is already decided

	var pid uint32
	kill := func() {
		if pid == 0 {
			return
		}
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer kcancel()
		_, err := inst.agent.Process.SendSignal(kctx, connect.NewRequest(&process.SendSignalRequest{
			Process: selectPid(pid),
			Signal:  process.Signal_SIGNAL_SIGKILL, // the agent kills the whole tree
		}))
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			m.log.Warn("kill command", attrSandbox, id, "pid", pid, "error", err)
		}
	}
	// Stop reading when the caller goes away.
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			pid = e.Start.GetPid()
			if withStdin {
				go m.feedStdin(context.WithoutCancel(sctx), inst, id, pid, *req.Stdin)
			}
		case *process.ProcessEvent_Data:
			if err := deliver(out, e.Data); err != nil {
				kill()
				return ExecResult{}, err
			}
		case *process.ProcessEvent_End:
			res := endResult(e.End, time.Since(began))
			if res.ExitCode != 0 && res.KilledBy != "timeout" {
				m.blameLimits(ctx, inst, &res)
			}
			return res, nil
		}
	}
	// The stream ended without an end event.
	kill()
	if ctx.Err() != nil {
		return ExecResult{}, ctx.Err()
	}
	if err := stream.Err(); err != nil {
		return ExecResult{}, m.lostAgent(ctx, inst, fmt.Errorf("exec in sandbox %s: %w", id, err))
	}
	return ExecResult{}, m.lostAgent(ctx, inst, errdefs.Unavailable("the agent of sandbox %s ended the command's stream early", id))
}

// deliver sends a data event's output to out.
func deliver(out Output, d *process.ProcessEvent_DataEvent) error {
	switch o := d.GetOutput().(type) {
	case *process.ProcessEvent_DataEvent_Stdout:
		return out(Stdout, o.Stdout)
	case *process.ProcessEvent_DataEvent_Stderr:
		return out(Stderr, o.Stderr)
	}
	return nil
}

// feedStdin writes the request's stdin and closes it. It runs beside the
// output loop, so a command that reads slowly cannot stall its own output.
func (m *Manager) feedStdin(ctx context.Context, inst *instance, id string, pid uint32, data string) {
	sel := selectPid(pid)
	if data != "" {
		_, err := inst.agent.Process.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{
			Process: sel,
			Input:   &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(data)}},
		}))
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			m.log.Warn("send stdin", attrSandbox, id, "pid", pid, "error", err)
		}
	}
	_, err := inst.agent.Process.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel}))
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("close stdin", attrSandbox, id, "pid", pid, "error", err)
	}
}

func selectPid(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

// endResult turns the agent's end event into a result.
func endResult(e *process.ProcessEvent_EndEvent, d time.Duration) ExecResult {
	r := ExecResult{ExitCode: int(e.GetExitCode()), Duration: d}
	switch {
	case e.GetError() == "timeout":
		r.TimedOut, r.KilledBy = true, "timeout"
		if r.ExitCode == 0 || r.ExitCode == -1 {
			r.ExitCode = 124 // what timeout(1) reports
		}
	case !e.GetExited() && strings.HasPrefix(e.GetStatus(), "signal"):
		r.KilledBy = "signal"
		if n, ok := signalNumbers[strings.TrimPrefix(e.GetStatus(), "signal: ")]; ok {
			r.ExitCode = 128 + n // what a shell reports
		}
	}
	return r
}

// blameLimits puts a failed command down to a limit the sandbox hit since
// the last look: "oom" when it ended with 137 (killed by SIGKILL, or a shell
// reporting that its child was) and the OOM killer killed; else "pids" when
// a fork was refused at the process limit, which kills nothing but makes
// commands fail. (With commands ending at once, one may take the blame for
// another's hit; the counts tell that one happened.)
func (m *Manager) blameLimits(ctx context.Context, inst *instance, res *ExecResult) {
	hits, err := inst.backend.LimitHits(ctx, inst.handle)
	if err != nil {
		m.log.Warn("read limit hits", attrSandbox, inst.id, "error", err)
		return
	}
	inst.mu.Lock()
	prev := inst.limitHits
	inst.limitHits = hits
	inst.mu.Unlock()
	switch {
	case res.ExitCode == 128+int(syscall.SIGKILL) && hits.OOMKills > prev.OOMKills:
		res.KilledBy = "oom"
	case res.KilledBy == "" && hits.PidsMax > prev.PidsMax:
		res.KilledBy = "pids"
	}
}

// signalNumbers maps Go's names of signals ("killed", as in the agent's
// "signal: killed") to their numbers.
var signalNumbers = func() map[string]int {
	m := map[string]int{}
	for n := 1; n < 65; n++ {
		m[syscall.Signal(n).String()] = n
	}
	return m
}()

func userOr(u string) string {
	if u == "" {
		return template.UserName
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
