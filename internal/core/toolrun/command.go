package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/net/netproxy"
)

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

// runCommandResult is what sandbox_run_command returns.
type runCommandResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	KilledBy   string `json:"killed_by,omitempty"`
}

// runCommandTool is sandbox_run_command in sandbox r: bash, run as any
// command is (exec.Run).
// What the sandbox's network policy refused while the command ran follows
// its stderr, a line each, so that a model can ask for the permission it
// lacks instead of guessing: log is where the refusals are (nil: not told).
func runCommandTool(ctx context.Context, r *core.Running, log *netproxy.Log, call Call, out exec.Output) (Outcome, error) {
	var refusals func() []string
	if log != nil {
		cursor := log.Last()
		refusals = func() []string {
			evs, _ := log.After(cursor)
			lines := make([]string, 0, len(evs))
			for _, ev := range evs {
				lines = append(lines, ev.Line())
			}
			return lines
		}
	}
	return commandTool(call.Args, out, refusals, func(a runCommandArgs, timeout time.Duration, capture exec.Output) (exec.Result, error) {
		return exec.Run(ctx, r, exec.Request{Cmd: []string{"/bin/bash", "-c", a.Command}, Cwd: a.Cwd, User: call.User, Timeout: timeout, ForUser: call.ForUser}, capture)
	})
}

// commandTool is sandbox_run_command wherever it runs: it checks the
// arguments, has run run the command with an Output that keeps the start
// of each stream (and passes it on to out), and tells how it ended, with
// the lines refusals returns (if not nil) after its stderr.
func commandTool(raw json.RawMessage, out exec.Output, refusals func() []string, run func(a runCommandArgs, timeout time.Duration, capture exec.Output) (exec.Result, error)) (Outcome, error) {
	var a runCommandArgs
	var failed *tools.Error
	if errors.As(tools.DecodeArgs(raw, &a), &failed) {
		return Outcome{Error: failed}, nil
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
	res, err := run(a, timeout, func(s exec.Stream, data []byte) error {
		if s == exec.Stdout {
			stdout.write(data)
		} else {
			stderr.write(data)
		}
		if out != nil {
			return out(s, data)
		}
		return nil
	})
	if errors.As(err, &failed) { // the command was not run
		return Outcome{Error: failed}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	if refusals != nil {
		for _, line := range refusals() {
			if stderr.Len() > 0 && !bytes.HasSuffix(stderr.Bytes(), []byte("\n")) {
				stderr.Buffer.WriteByte('\n')
			}
			stderr.Buffer.WriteString(line + "\n")
		}
	}
	result, err := json.Marshal(runCommandResult{
		ExitCode: res.ExitCode, Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated: stdout.truncated || stderr.truncated, DurationMS: res.Duration.Milliseconds(), KilledBy: res.KilledBy,
	})
	if err != nil {
		return Outcome{}, err
	}
	outcome := Outcome{Result: result}
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
