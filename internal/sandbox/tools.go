package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/template"
	"github.com/hutchdev/hutch/internal/tools"
)

// Agent tools (package tools). The file tools run in the sandbox's agent,
// on the sandbox's files; sandbox_run_command runs here, as an exec.

// ToolCall is a call of a tool of the catalogue.
type ToolCall struct {
	Name string
	Args json.RawMessage
	User string // who it acts as in the sandbox (default: the sandbox user)
	// Mode is tools.ModeAll, ModeSelective or ModeOff; "" means the
	// daemon's (Config.ToolMode).
	Mode string
}

// ToolOutcome is how a tool call ended: its result, its failure, or both
// (a command that failed still has its output).
type ToolOutcome struct {
	Result json.RawMessage
	Error  *tools.Error
	// Where is where it ran: "sandbox" or "host"; Why, in selective
	// mode, what made it risky.
	Where, Why string
}

// Where tool calls run.
const (
	InSandbox = "sandbox"
	OnHost    = "host"
)

// RunTool runs a tool call in sandbox id (waking it), or on the host as
// its mode says (hosttools.go). out, when not nil, gets a command's output
// as it comes. The error is the call's (no such sandbox or tool, a mode
// this daemon refuses); a tool's own failure is in the outcome.
func (m *Manager) RunTool(ctx context.Context, id string, call ToolCall, out Output) (ToolOutcome, error) {
	tool, ok := tools.Lookup(call.Name)
	if !ok {
		return ToolOutcome{}, errdefs.NotFound("no tool %q (GET /v1/tools lists them)", call.Name)
	}
	onHost, why, err := m.toolOnHost(call)
	if err != nil {
		return ToolOutcome{}, err
	}
	if onHost {
		if _, err := m.store.GetSandbox(ctx, id); err != nil {
			return ToolOutcome{}, err
		}
		outcome, err := m.runOnHost(ctx, call, out)
		outcome.Where = OnHost
		return outcome, err
	}
	outcome, err := m.runInSandbox(ctx, id, tool, call, out)
	outcome.Where, outcome.Why = InSandbox, why
	return outcome, err
}

func (m *Manager) runInSandbox(ctx context.Context, id string, tool tools.Tool, call ToolCall, out Output) (ToolOutcome, error) {
	inst, release, err := m.acquire(ctx, id) // busy while it runs, as a command is
	if err != nil {
		return ToolOutcome{}, err
	}
	defer release()
	switch {
	case tool.Name == tools.RunCommand:
		return m.runCommandTool(ctx, inst, call.Args, call.User, out)
	case tool.Name == tools.DownloadURL:
		return m.downloadTool(ctx, inst, call.Args, call.User)
	case !tool.InSandbox:
		return ToolOutcome{}, errdefs.NotImplemented("tool %s runs nowhere", tool.Name)
	}
	res, err := inst.agent.RunTool(ctx, tool.Name, call.Args, template.Workspace, userOr(call.User))
	var failed *tools.Error
	if errors.As(err, &failed) {
		return ToolOutcome{Error: failed}, nil
	}
	if err != nil {
		return ToolOutcome{}, err
	}
	return ToolOutcome{Result: res}, nil
}

// Bounds of sandbox_run_command.
const (
	defaultToolTimeout = 180 * time.Second
	maxToolTimeout     = 1800 * time.Second
	maxToolOutput      = 64 << 10 // per stream
)

type runCommandArgs struct {
	Command  string `json:"command"`
	Cwd      string `json:"cwd"`
	TimeoutS int    `json:"timeout_s"`
}

// RunCommandResult is what sandbox_run_command returns.
type RunCommandResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	KilledBy   string `json:"killed_by,omitempty"`
}

func (m *Manager) runCommandTool(ctx context.Context, inst *instance, raw json.RawMessage, user string, out Output) (ToolOutcome, error) {
	return commandTool(raw, out, func(a runCommandArgs, timeout time.Duration, capture Output) (ExecResult, error) {
		return m.run(ctx, inst, []string{"/bin/bash", "-c", a.Command}, ExecRequest{Cwd: a.Cwd, User: user}, timeout, capture)
	})
}

// commandTool is sandbox_run_command wherever it runs: it checks the
// arguments, has run run the command with an Output that keeps the start
// of each stream (and passes it on to out), and tells how it ended.
func commandTool(raw json.RawMessage, out Output, run func(a runCommandArgs, timeout time.Duration, capture Output) (ExecResult, error)) (ToolOutcome, error) {
	var a runCommandArgs
	var failed *tools.Error
	if errors.As(tools.DecodeArgs(raw, &a), &failed) {
		return ToolOutcome{Error: failed}, nil
	}
	timeout := time.Duration(a.TimeoutS) * time.Second
	switch {
	case strings.TrimSpace(a.Command) == "":
		return toolFailure(tools.KindInvalidArgument, "command is required"), nil
	case timeout == 0:
		timeout = defaultToolTimeout
	case timeout < 0 || timeout > maxToolTimeout:
		return toolFailure(tools.KindInvalidArgument, "timeout_s must be between 1 and %d", int(maxToolTimeout.Seconds())), nil
	}
	var stdout, stderr cappedBuffer
	res, err := run(a, timeout, func(s Stream, data []byte) error {
		if s == Stdout {
			stdout.write(data)
		} else {
			stderr.write(data)
		}
		if out != nil {
			return out(s, data)
		}
		return nil
	})
	if err != nil {
		return ToolOutcome{}, err
	}
	result, err := json.Marshal(RunCommandResult{
		ExitCode: res.ExitCode, Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated: stdout.truncated || stderr.truncated, DurationMS: res.Duration.Milliseconds(), KilledBy: res.KilledBy,
	})
	if err != nil {
		return ToolOutcome{}, err
	}
	outcome := ToolOutcome{Result: result}
	switch {
	case res.TimedOut:
		outcome.Error = &tools.Error{Kind: tools.KindTimeout, Message: fmt.Sprintf(
			"the command ran past its %d s timeout and was killed; its output so far is in the result (start long-running work as a background process)", int(timeout.Seconds()))}
	case res.ExitCode != 0:
		why := ""
		if res.KilledBy != "" {
			why = " (killed: " + res.KilledBy + ")"
		}
		outcome.Error = &tools.Error{Kind: tools.KindCommandFailed, Message: fmt.Sprintf("the command exited with %d%s", res.ExitCode, why)}
	}
	return outcome, nil
}

func toolFailure(kind, format string, args ...any) ToolOutcome {
	return ToolOutcome{Error: &tools.Error{Kind: kind, Message: fmt.Sprintf(format, args...)}}
}

// cappedBuffer keeps the first maxToolOutput bytes written to it.
type cappedBuffer struct {
	bytes.Buffer
	truncated bool
}

func (c *cappedBuffer) write(p []byte) {
	if room := maxToolOutput - c.Len(); len(p) > room {
		p, c.truncated = p[:max(room, 0)], true
	}
	c.Buffer.Write(p)
}
