package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	// The core owns goroutines (timers, agent connections): a closed one
	// leaves none, and neither does a tool call.
	// (Host commands start from one thread that lives as long as the
	// process: host.go's noNewPrivsThread.)
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hutchdev/hutch/internal/core/toolrun.noNewPrivsThread"))
}

// run calls tool name with args in sandbox id and fails the test on the
// call's error (not the tool's).
func run(t *testing.T, s *Service, id string, call Call) Outcome {
	t.Helper()
	outcome, err := s.RunTool(t.Context(), id, call, nil)
	if err != nil {
		t.Fatalf("%s: %v", call.Name, err)
	}
	return outcome
}

// newSandbox makes a sandbox, deleted when the test ends (before the core
// closes: a closed core keeps its sandboxes, as a stopped daemon does).
func newSandbox(t *testing.T, c *coretest.Core) *store.Sandbox {
	t.Helper()
	sb := c.Create(t, create.Options{})
	t.Cleanup(func() {
		if err := c.M.Delete(context.WithoutCancel(t.Context()), sb.ID); err != nil {
			t.Errorf("delete sandbox %s: %v", sb.ID, err)
		}
	})
	return sb
}

func args(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// In mode all every call runs in the sandbox: the file tools on its files,
// as its user; commands through the core's exec, their output streamed as
// it comes and reported with how they ended. (The fake has no chroot: the
// sandbox's paths are under its root on the host, and the tests name them
// so, never the workspace's own path, which is the host's.)
func TestRunToolInSandbox(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	s := New(Config{Sandboxes: c.M})
	sb := newSandbox(t, c)

	ws := c.Workspace(sb.ID)
	res := run(t, s, sb.ID, Call{Name: tools.WriteFile, Args: args(t, map[string]string{"path": ws + "/src/app.py", "content": "print(1)\n"})})
	if res.Error != nil || res.Where != whereSandbox {
		t.Fatalf("write: %+v", res)
	}
	if fi, err := os.Stat(filepath.Join(ws, "src/app.py")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != rootfs.UserUID {
		t.Errorf("the file written in the sandbox, the user's: %+v, %v", fi, err)
	}
	res = run(t, s, sb.ID, Call{Name: tools.ReadFile, Args: args(t, map[string]string{"path": ws + "/nope.txt"})})
	if res.Error == nil || res.Error.Kind != tools.KindNotFound {
		t.Errorf("a read of nothing: %+v", res)
	}

	var mu sync.Mutex
	var streamed strings.Builder
	out := func(st exec.Stream, data []byte) error {
		mu.Lock()
		defer mu.Unlock()
		streamed.WriteString(string(st) + ":" + string(data))
		return nil
	}
	res, err := s.RunTool(t.Context(), sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "cat app.py; id -u", "cwd": ws + "/src"})}, out)
	var ran runCommandResult
	if err != nil || res.Error != nil || json.Unmarshal(res.Result, &ran) != nil || ran.Stdout != "print(1)\n1000\n" || ran.ExitCode != 0 {
		t.Errorf("a command: %+v %+v %v", res, ran, err)
	}
	if got := streamed.String(); !strings.Contains(got, "stdout:") || !strings.Contains(got, "1000") {
		t.Errorf("streamed %q", got)
	}

	tests := []struct {
		name     string
		call     Call
		wantKind string
	}{
		{"a failing command", Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "echo no >&2; exit 3", "cwd": ws})}, tools.KindCommandFailed},
		{"a command past its timeout", Call{Name: tools.RunCommand, Args: args(t, map[string]any{"command": "sleep 30", "timeout_s": 1, "cwd": ws})}, tools.KindTimeout},
		{"no command", Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": " "})}, tools.KindInvalidArgument},
		{"an unknown argument", Call{Name: tools.RunCommand, Args: args(t, map[string]string{"comand": "true"})}, tools.KindInvalidArgument},
		{"downloads off", Call{Name: tools.DownloadURL, Args: args(t, map[string]string{"path": ws + "/src"})}, tools.KindFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := run(t, s, sb.ID, tc.call)
			if res.Error == nil || res.Error.Kind != tc.wantKind || res.Where != whereSandbox {
				t.Errorf("%+v, want a failure of kind %s", res, tc.wantKind)
			}
		})
	}
}

// The call's own errors, as against its tool's failures.
func TestRunToolErrors(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	strict := New(Config{Sandboxes: c.M})
	host := New(Config{Sandboxes: c.M, HostDir: hostDir(t)})
	sb := newSandbox(t, c)
	command := args(t, map[string]string{"command": "true"})

	tests := []struct {
		name    string
		s       *Service
		id      string
		call    Call
		want    error
		wantMsg string
	}{
		{"no such tool", strict, sb.ID, Call{Name: "sandbox_fly", Args: command}, errdefs.ErrNotFound, "GET /v1/tools"},
		{"no such sandbox", strict, "nosuchsandbox", Call{Name: tools.RunCommand, Args: command}, errdefs.ErrNotFound, ""},
		{"no such sandbox, on the host", host, "nosuchsandbox", Call{Name: tools.RunCommand, Args: command, Mode: tools.ModeOff}, errdefs.ErrNotFound, ""},
		{"an unknown mode", host, sb.ID, Call{Name: tools.RunCommand, Args: command, Mode: "sometimes"}, errdefs.ErrInvalidArgument, "mode must be"},
		{"mode off without a host directory", strict, sb.ID, Call{Name: tools.RunCommand, Args: command, Mode: tools.ModeOff}, errdefs.ErrFailedPrecondition, "--tools-host-dir"},
		{"mode selective without a host directory", strict, sb.ID, Call{Name: tools.RunCommand, Args: command, Mode: tools.ModeSelective}, errdefs.ErrFailedPrecondition, "--tools-host-dir"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.s.RunTool(t.Context(), tc.id, tc.call, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.wantMsg) {
				t.Errorf("err = %v, want %v saying %q", err, tc.want, tc.wantMsg)
			}
		})
	}
}

// Mode off runs calls on the host, in the host directory, with nothing of
// the daemon's environment; selective sends only the risky ones to the
// sandbox, saying why; the daemon's mode is what a call naming none gets.
func TestHostModes(t *testing.T) {
	t.Setenv("HUTCH_TEST_SECRET", "leaked") // no t.Parallel: it sets the environment
	c := coretest.Start(t)
	dir := hostDir(t)
	s := New(Config{Sandboxes: c.M, HostDir: dir, Mode: tools.ModeOff})
	sb := newSandbox(t, c)

	res := run(t, s, sb.ID, Call{Name: tools.WriteFile, Args: args(t, map[string]string{"path": "on-host.txt", "content": "host\n"})})
	if res.Error != nil || res.Where != whereHost {
		t.Fatalf("off, write: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "on-host.txt")); err != nil || string(b) != "host\n" {
		t.Errorf("the file written on the host: %q, %v", b, err)
	}
	ws := c.Workspace(sb.ID)
	if _, err := os.Stat(filepath.Join(ws, "on-host.txt")); err == nil {
		t.Error("mode off wrote in the sandbox")
	}
	var ran runCommandResult
	res = run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "pwd; echo ${HUTCH_TEST_SECRET:-none}"})})
	if err := json.Unmarshal(res.Result, &ran); err != nil || res.Where != whereHost || ran.Stdout != dir+"\nnone\n" {
		t.Errorf("off, a command: %+v %q %v", res, ran.Stdout, err)
	}
	res = run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]any{"command": "sleep 30", "timeout_s": 1})})
	if res.Error == nil || res.Error.Kind != tools.KindTimeout || res.Where != whereHost {
		t.Errorf("off, a command past its timeout: %+v", res)
	}
	res = run(t, s, sb.ID, Call{Name: tools.DownloadURL, Args: args(t, map[string]string{"path": "on-host.txt"})})
	if res.Error == nil || res.Error.Kind != tools.KindBlockedByPolicy {
		t.Errorf("off, a download URL: %+v", res)
	}

	res = run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "cat on-host.txt"}), Mode: tools.ModeSelective})
	if err := json.Unmarshal(res.Result, &ran); err != nil || res.Where != whereHost || ran.Stdout != "host\n" {
		t.Errorf("selective, a safe command: %+v", res)
	}
	res = run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "pip install nothing-here; pwd", "cwd": ws}), Mode: tools.ModeSelective})
	if err := json.Unmarshal(res.Result, &ran); err != nil || res.Where != whereSandbox || !strings.Contains(res.Why, "installs packages") || ran.Stdout != ws+"\n" {
		t.Errorf("selective, an install: %+v %q", res, ran.Stdout)
	}
	res = run(t, s, sb.ID, Call{Name: tools.RunCommand, Args: args(t, map[string]string{"command": "pwd", "cwd": ws}), Mode: tools.ModeAll})
	if res.Where != whereSandbox || res.Why != "" {
		t.Errorf("all: %+v", res)
	}
}

// sandbox_run_command's output is kept up to a bound per stream, the rest
// still streamed; its arguments are checked before anything runs.
func TestCommandTool(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", maxToolOutput+10)
	tests := []struct {
		name          string
		args          string
		res           exec.Result
		wantRun       bool
		wantKind      string
		wantTruncated bool
	}{
		{"success", `{"command": "echo"}`, exec.Result{}, true, "", true},
		{"an exit code", `{"command": "false"}`, exec.Result{ExitCode: 1}, true, tools.KindCommandFailed, true},
		{"killed", `{"command": "x"}`, exec.Result{ExitCode: 137, KilledBy: "oom"}, true, tools.KindCommandFailed, true},
		{"timed out", `{"command": "x"}`, exec.Result{ExitCode: 124, TimedOut: true, KilledBy: "timeout"}, true, tools.KindTimeout, true},
		{"no command", `{}`, exec.Result{}, false, tools.KindInvalidArgument, false},
		{"a negative timeout", `{"command": "x", "timeout_s": -1}`, exec.Result{}, false, tools.KindInvalidArgument, false},
		{"too long a timeout", `{"command": "x", "timeout_s": 1801}`, exec.Result{}, false, tools.KindInvalidArgument, false},
		{"not an object", `[]`, exec.Result{}, false, tools.KindInvalidArgument, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ran, streamed := false, 0
			outcome, err := commandTool(json.RawMessage(tc.args), func(_ exec.Stream, data []byte) error {
				streamed += len(data)
				return nil
			}, nil, func(_ runCommandArgs, _ time.Duration, capture exec.Output) (exec.Result, error) {
				ran = true
				if err := capture(exec.Stdout, []byte(big)); err != nil {
					return exec.Result{}, err
				}
				return tc.res, capture(exec.Stderr, []byte("e"))
			})
			if err != nil {
				t.Fatal(err)
			}
			if ran != tc.wantRun {
				t.Errorf("ran = %v, want %v", ran, tc.wantRun)
			}
			kind := ""
			if outcome.Error != nil {
				kind = outcome.Error.Kind
			}
			if kind != tc.wantKind {
				t.Errorf("failure %+v, want kind %q", outcome.Error, tc.wantKind)
			}
			if !tc.wantRun {
				return
			}
			var res runCommandResult
			if err := json.Unmarshal(outcome.Result, &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Stdout) != maxToolOutput || res.Stderr != "e" || res.Truncated != tc.wantTruncated || res.ExitCode != tc.res.ExitCode || res.KilledBy != tc.res.KilledBy {
				t.Errorf("result: %d bytes of stdout, %+v", len(res.Stdout), res)
			}
			if streamed != len(big)+1 {
				t.Errorf("streamed %d bytes, want %d", streamed, len(big)+1)
			}
		})
	}
}

// What the network policy refused while a command ran follows its stderr,
// a line each.
func TestCommandResultTellsRefusals(t *testing.T) {
	outcome, err := commandTool(json.RawMessage(`{"command":"curl https://registry.example.com"}`), nil,
		func() []string {
			return []string{"blocked_by_policy: registry.example.com:443 is not in the allow-list"}
		},
		func(_ runCommandArgs, _ time.Duration, capture exec.Output) (exec.Result, error) {
			return exec.Result{ExitCode: 35}, capture(exec.Stderr, []byte("curl: (35) connection reset"))
		})
	if err != nil {
		t.Fatal(err)
	}
	var res runCommandResult
	if err := json.Unmarshal(outcome.Result, &res); err != nil {
		t.Fatal(err)
	}
	if want := "curl: (35) connection reset\nblocked_by_policy: registry.example.com:443 is not in the allow-list\n"; res.Stderr != want {
		t.Fatalf("stderr %q, want %q", res.Stderr, want)
	}
}
