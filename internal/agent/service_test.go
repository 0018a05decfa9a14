package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

// The tests of Hutch's own service (hutch.agent.v1) go through the daemon's
// typed client, as the daemon does. Like the other tests that start an
// agent, they run one at a time: each agent reaps the test process's
// orphans.

func TestAgentStart(t *testing.T) {
	a := startAgent(t)
	if err := os.Mkdir(filepath.Join(a.home, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cmd    agentclient.Command
		stdout func(a *testAgent) string
		stderr string
		exit   agentclient.ExitStatus
	}{{
		name:   "argv, path lookup",
		cmd:    agentclient.Command{Argv: []string{"echo", "a b", "c"}},
		stdout: func(*testAgent) string { return "a b c\n" },
		exit:   agentclient.ExitStatus{Exited: true, Status: "exit status 0"},
	}, {
		name:   "stderr and exit code",
		cmd:    shCmd("echo oops >&2; exit 3"),
		stderr: "oops\n",
		exit:   agentclient.ExitStatus{Code: 3, Exited: true, Status: "exit status 3"},
	}, {
		name: "env, cwd relative to home",
		cmd: agentclient.Command{Argv: []string{"/bin/sh", "-c", `echo "$FOO $(pwd)"`},
			Env: map[string]string{"FOO": "bar"}, Cwd: "sub"},
		stdout: func(a *testAgent) string { return "bar " + filepath.Join(a.home, "sub") + "\n" },
		exit:   agentclient.ExitStatus{Exited: true, Status: "exit status 0"},
	}, {
		name:   "user",
		cmd:    agentclient.Command{Argv: []string{"/bin/sh", "-c", "echo $(id -u) $HOME"}, User: "root"},
		stdout: func(a *testAgent) string { return "0 " + a.root + "\n" },
		exit:   agentclient.ExitStatus{Exited: true, Status: "exit status 0"},
	}, {
		name:   "stdin is fed, then ends",
		cmd:    agentclient.Command{Argv: []string{"cat"}, Stdin: []byte("fed\n")},
		stdout: func(*testAgent) string { return "fed\n" },
		exit:   agentclient.ExitStatus{Exited: true, Status: "exit status 0"},
	}, {
		name:   "empty stdin ends at once",
		cmd:    agentclient.Command{Argv: []string{"/bin/sh", "-c", "cat; test -p /dev/stdin && echo pipe"}, Stdin: []byte{}},
		stdout: func(*testAgent) string { return "pipe\n" },
		exit:   agentclient.ExitStatus{Exited: true, Status: "exit status 0"},
	}, {
		name:   "no stdin reads /dev/null",
		cmd:    shCmd("cat; test -c /dev/stdin && echo null"),
		stdout: func(*testAgent) string { return "null\n" },
		exit:   agentclient.ExitStatus{Exited: true, Status: "exit status 0"},
	}, {
		name: "killed by a signal",
		cmd:  shCmd("kill -9 $$"),
		exit: agentclient.ExitStatus{Code: -1, Signal: syscall.SIGKILL, Status: "signal: killed"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := a.runCmd(t, tt.cmd)
			want := ""
			if tt.stdout != nil {
				want = tt.stdout(a)
			}
			if res.stdout.String() != want || res.stderr.String() != tt.stderr {
				t.Errorf("stdout %q, stderr %q; want %q, %q", res.stdout.String(), res.stderr.String(), want, tt.stderr)
			}
			if *res.exit != tt.exit {
				t.Errorf("exit %+v, want %+v", *res.exit, tt.exit)
			}
			if res.pid == 0 {
				t.Error("no pid")
			}
		})
	}
}

func TestAgentStartErrors(t *testing.T) {
	a := startAgent(t)
	writeFile(t, filepath.Join(a.home, "file"), "x")
	running := shCmd("exec sleep 1000")
	running.Tag = "taken"
	p := a.startCmd(t, running)
	t.Cleanup(func() { a.kill(t, pidSelector(p.pid)) })

	tests := []struct {
		name string
		cmd  agentclient.Command
		kind error
		msg  string
	}{
		{name: "no argv", cmd: agentclient.Command{}, kind: errdefs.ErrInvalidArgument, msg: "command.argv must name a program"},
		{name: "program not found", cmd: agentclient.Command{Argv: []string{"no-such-command"}}, kind: errdefs.ErrInvalidArgument, msg: "executable file not found"},
		{name: "unknown user", cmd: agentclient.Command{Argv: []string{"true"}, User: "mallory"}, kind: errdefs.ErrInvalidArgument, msg: `unknown user "mallory"`},
		{name: "cwd is a file", cmd: agentclient.Command{Argv: []string{"true"}, Cwd: "file"}, kind: errdefs.ErrInvalidArgument, msg: "is not a directory"},
		{name: "bad env", cmd: agentclient.Command{Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}}, kind: errdefs.ErrInvalidArgument, msg: "invalid environment variable"},
		{name: "kept output without a tag", cmd: agentclient.Command{Argv: []string{"true"}, KeepOutput: 10}, kind: errdefs.ErrInvalidArgument, msg: "needs a tag"},
		{name: "too much output kept", cmd: agentclient.Command{Argv: []string{"true"}, Tag: "big", KeepOutput: maxKeepOutput + 1}, kind: errdefs.ErrInvalidArgument, msg: "up to"},
		{name: "tag taken", cmd: agentclient.Command{Argv: []string{"true"}, Tag: "taken"}, kind: errdefs.ErrAlreadyExists, msg: `tag "taken" is already running`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.client.Start(t.Context(), tt.cmd)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Start = %v, want %v containing %q", err, tt.kind, tt.msg)
			}
		})
	}
	if procs, err := a.client.Processes(t.Context()); err != nil || len(procs) != 1 || procs[0].Tag != "taken" {
		t.Errorf("failed starts left processes: %+v, %v", procs, err)
	}
}

// A timeout ends the command and everything it left behind: SIGTERM, then
// after the grace SIGKILL to its whole tree.
func TestTimeout(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		// Leaves a process in a new session and a double-forked one, prints
		// their pids, then waits. The prefix (a trap) comes first: on a
		// loaded host the timeout can come before a later line runs.
		const leaver = `%s setsid sh -c 'echo $$; exec sleep 1000' &
(sh -c 'echo $$; exec sleep 1000' &) ;
sleep 0.2; sleep 1000`
		tests := []struct {
			name   string
			prefix string // before the final sleep
			grace  time.Duration
			signal syscall.Signal
		}{
			{name: "main ends on SIGTERM", grace: 5 * time.Second, signal: syscall.SIGTERM},
			{name: "main ignores SIGTERM", prefix: "trap '' TERM;", grace: 100 * time.Millisecond, signal: syscall.SIGKILL},
			{name: "no grace", prefix: "trap '' TERM;", grace: -1, signal: syscall.SIGKILL},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cmd := shCmd(fmt.Sprintf(leaver, tt.prefix))
				cmd.Timeout, cmd.KillGrace = 500*time.Millisecond, tt.grace
				began := time.Now()
				res := a.runCmd(t, cmd)
				took := time.Since(began)
				pids := parsePids(t, res.stdout.String())
				killOnCleanup(t, pids)
				if len(pids) != 2 {
					t.Fatalf("stdout %q: want two pids", res.stdout.String())
				}
				if !res.exit.TimedOut || res.exit.Signal != tt.signal || res.exit.Exited {
					t.Errorf("exit = %+v, want timed out by %v", *res.exit, tt.signal)
				}
				if took > 3*time.Second {
					t.Errorf("took %s", took)
				}
				waitGone(t, pids)
			})
		}

		t.Run("no timeout when it ends in time", func(t *testing.T) {
			cmd := shCmd("exit 0")
			cmd.Timeout = 5 * time.Second
			if res := a.runCmd(t, cmd); res.exit.TimedOut || res.exit.Code != 0 {
				t.Errorf("exit = %+v", *res.exit)
			}
		})
	})
}

// A tagged command started with its output kept replays it while it runs
// (then, following, to its end) and after it ended, until the tag's next
// start.
func TestReplay(t *testing.T) {
	a := startAgent(t)
	gate := filepath.Join(a.home, "go-on")
	replay := func(tag string, follow bool, then func()) (*result, error) {
		logs, err := a.client.Replay(t.Context(), tag, follow)
		if err != nil {
			return nil, err
		}
		defer func() { _ = logs.Close() }()
		return (&started{pid: logs.Pid, exe: logs}).rest(func(res *result) {
			if then != nil && strings.Count(res.stdout.String(), "\n") == 2 {
				then()
				then = nil
			}
		})
	}
	logged := func(script string) agentclient.Command {
		cmd := shCmd(script)
		cmd.Tag, cmd.KeepOutput = "web", 1000
		return cmd
	}

	p := a.startCmd(t, logged(`echo one; echo two; while [ ! -e go-on ]; do sleep 0.01; done; echo three; echo err >&2`))
	for read := ""; !strings.Contains(read, "two"); {
		read += p.readLine(t)
	}
	running, err := replay("web", true, func() { writeFile(t, gate, "") })
	if err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if running.stdout.String() != "one\ntwo\nthree\n" || running.stderr.String() != "err\n" || running.end.GetStatus() != "exit status 0" || running.pid != p.pid {
		t.Errorf("replay while running: stdout %q, stderr %q, end %v, pid %d", running.stdout.String(), running.stderr.String(), running.end, running.pid)
	}
	for _, follow := range []bool{true, false} {
		after, err := replay("web", follow, nil)
		if err != nil {
			t.Fatal(err)
		}
		if after.stdout.String() != "one\ntwo\nthree\n" || after.stderr.String() != "err\n" || after.end.GetStatus() != "exit status 0" {
			t.Errorf("replay (follow %v) after the end: stdout %q, stderr %q, end %v", follow, after.stdout.String(), after.stderr.String(), after.end)
		}
	}

	// A tail of a running command ends after what was kept.
	pt := a.startCmd(t, logged("echo first; exec sleep 1000"))
	if got := pt.readLine(t); got != "first" {
		t.Fatalf("start stream read %q", got)
	}
	if res, err := replay("web", false, nil); err != nil || res.stdout.String() != "first\n" || res.end != nil {
		t.Errorf("tail of a running command: %v, %v", res, err)
	}
	if err := a.client.Signal(t.Context(), agentclient.Tag("web"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pt.wait(t)

	a.runCmd(t, logged("echo second"))
	if res, err := replay("web", false, nil); err != nil || res.stdout.String() != "second\n" {
		t.Errorf("replay after the next start: %v, %v", res, err)
	}
	if _, err := replay("other", false, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("replay of an unknown tag: %v, want not found", err)
	}
	if _, err := replay("", false, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("replay without a tag: %v, want invalid argument", err)
	}
}

func TestAgentSignal(t *testing.T) {
	a := startAgent(t)
	cmd := shCmd("trap 'echo hup' HUP; echo ready; while :; do sleep 0.01; done")
	cmd.Tag = "sig"
	p := a.startCmd(t, cmd)
	if got := p.readLine(t); got != "ready" {
		t.Fatalf("read %q", got)
	}
	if err := a.client.Signal(t.Context(), agentclient.Tag("sig"), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := p.readLine(t); got != "hup" {
		t.Errorf("after SIGHUP by tag: read %q", got)
	}
	tests := []struct {
		name string
		sel  agentclient.Selector
		sig  syscall.Signal
		kind error
	}{
		{name: "unsupported signal", sel: agentclient.Tag("sig"), sig: syscall.SIGSTOP, kind: errdefs.ErrInvalidArgument},
		{name: "unknown tag", sel: agentclient.Tag("nope"), sig: syscall.SIGTERM, kind: errdefs.ErrNotFound},
		{name: "unknown pid", sel: agentclient.Pid(999999), sig: syscall.SIGKILL, kind: errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.client.Signal(t.Context(), tt.sel, tt.sig); !errors.Is(err, tt.kind) {
				t.Errorf("Signal = %v, want %v", err, tt.kind)
			}
		})
	}
	if err := a.client.Signal(t.Context(), agentclient.Pid(p.pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Once SIGKILL returns, the command no longer runs: its tag is free at
	// once (a background process deleted and started again by name).
	again, err := a.client.Start(t.Context(), cmd)
	if err != nil {
		t.Fatalf("Start of the tag at once after SIGKILL: %v", err)
	}
	if res := p.wait(t); res.exit.Signal != syscall.SIGKILL {
		t.Errorf("exit %+v", *res.exit)
	}
	if err := a.client.Signal(t.Context(), agentclient.Pid(again.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = again.Close()
}

// A shell that does not exec its command, as a service's /bin/sh -c: a
// SIGTERM ends the shell only, and the child it leaves behind runs on; a
// second SIGTERM reaches that child, other signals do not. Signal 0 tells
// whether anything of the command is left.
func TestAgentSignalLeftovers(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		cmd := shCmd("sleep 1000 & echo $!; wait")
		cmd.Tag = "web"
		p := a.startCmd(t, cmd)
		child := p.readPids(t, 1)
		killOnCleanup(t, child)
		signal := func(sig syscall.Signal) error { return a.client.Signal(t.Context(), agentclient.Tag("web"), sig) }

		if err := signal(0); err != nil {
			t.Errorf("signal 0 to a running command: %v", err)
		}
		if err := signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if res := p.wait(t); res.exit.Signal != syscall.SIGTERM {
			t.Errorf("the shell's exit: %+v", *res.exit)
		}
		if !alive(child[0]) {
			t.Fatal("the first SIGTERM reached the child")
		}
		if err := signal(0); err != nil {
			t.Errorf("signal 0 with the child left: %v", err)
		}
		if err := signal(syscall.SIGHUP); !errors.Is(err, errdefs.ErrNotFound) || !alive(child[0]) {
			t.Errorf("SIGHUP with the child left: %v; it reached the child: %v", err, !alive(child[0]))
		}
		if err := signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitGone(t, child)
		deadline := time.Now().Add(5 * time.Second)
		for err := signal(0); !errors.Is(err, errdefs.ErrNotFound); err = signal(0) {
			if time.Now().After(deadline) {
				t.Fatalf("signal 0 5 s after nothing is left: %v, want not found", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func TestAgentProcesses(t *testing.T) {
	a := startAgent(t)
	cmd := agentclient.Command{Argv: []string{"sleep", "1000"}, Cwd: "/tmp", Tag: "nap"}
	p := a.startCmd(t, cmd)
	procs, err := a.client.Processes(t.Context())
	want := agentclient.Process{Pid: p.pid, Tag: "nap", Argv: []string{"sleep", "1000"}, Cwd: "/tmp"}
	if err != nil || len(procs) != 1 || procs[0].Pid != want.Pid || procs[0].Tag != want.Tag ||
		!slices.Equal(procs[0].Argv, want.Argv) || procs[0].Cwd != want.Cwd {
		t.Errorf("Processes = %+v, %v; want [%+v]", procs, err, want)
	}
	a.kill(t, pidSelector(p.pid))
	p.wait(t)
}

func TestRunTool(t *testing.T) {
	a := startAgent(t)
	ws := filepath.Join(a.home, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, testUID, testUID); err != nil {
		t.Fatal(err)
	}
	write := json.RawMessage(`{"path":"notes/a.txt","content":"hi\n"}`)
	res, err := a.client.RunTool(t.Context(), tools.WriteFile, write, ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var wrote tools.WriteResult
	if err := json.Unmarshal(res, &wrote); err != nil || !wrote.Created || wrote.Bytes != 3 {
		t.Errorf("write result %s (%v)", res, err)
	}
	fi, err := os.Stat(filepath.Join(a.home, "ws/notes/a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != testUID {
		t.Errorf("the tool's file belongs to uid %d", uid)
	}

	tests := []struct {
		name, tool, args, dir, user string
		kind                        string // the tool's failure
		callErr                     error  // or the call's
	}{
		{name: "relative dir is in home", tool: tools.ReadFile, args: `{"path":"notes/a.txt"}`, dir: "ws"},
		{name: "default dir is home", tool: tools.ReadFile, args: `{"path":"ws/notes/a.txt"}`},
		{name: "missing file", tool: tools.ReadFile, args: `{"path":"nope"}`, kind: tools.KindNotFound},
		{name: "unknown tool", tool: "sandbox_fly", args: `{}`, kind: tools.KindNotFound},
		{name: "unknown user", tool: tools.ReadFile, args: `{"path":"x"}`, user: "mallory", callErr: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := a.client.RunTool(t.Context(), tt.tool, json.RawMessage(tt.args), tt.dir, tt.user)
			var failed *tools.Error
			switch {
			case tt.callErr != nil:
				if !errors.Is(err, tt.callErr) {
					t.Errorf("RunTool = %v, want %v", err, tt.callErr)
				}
			case tt.kind != "":
				if !errors.As(err, &failed) || failed.Kind != tt.kind {
					t.Errorf("RunTool = %v, want a %s failure", err, tt.kind)
				}
			case err != nil || !strings.Contains(string(res), `hi`):
				t.Errorf("RunTool = %s, %v", res, err)
			}
		})
	}
}

func TestArchive(t *testing.T) {
	a := startAgent(t)
	if err := os.MkdirAll(filepath.Join(a.home, "proj/src"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(a.home, "proj/src/main.go"), "package main\n")
	writeFile(t, filepath.Join(a.home, "proj/README"), "read me\n")
	// Incompressible and bigger than a chunk: the archive comes in several.
	big := make([]byte, 3*archiveChunk)
	_, _ = rand.Read(big)
	if err := os.WriteFile(filepath.Join(a.home, "proj/big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"", tools.FormatTarGz, tools.FormatZip, tools.FormatTar} {
		t.Run("format "+format, func(t *testing.T) {
			rc, err := a.client.Archive(t.Context(), "proj", format, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			// What the agent streams is the archive, whole.
			var want bytes.Buffer
			if err := tools.WriteArchive(&want, filepath.Join(a.home, "proj"), format); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("streamed %d bytes, not the %d of the archive", len(got), want.Len())
			}
		})
	}
	tests := []struct {
		name, path, format string
		kind               error
	}{
		{name: "missing", path: "nope", kind: errdefs.ErrNotFound},
		{name: "a file", path: "proj/README", kind: errdefs.ErrInvalidArgument},
		{name: "bad format", path: "proj", format: "rar", kind: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := a.client.Archive(t.Context(), tt.path, tt.format, ""); !errors.Is(err, tt.kind) {
				t.Errorf("Archive = %v, want %v", err, tt.kind)
			}
		})
	}
}

// agentEvent gives envd's events Hutch's shape, with what the command's
// wait status said.
func TestAgentEvent(t *testing.T) {
	t.Parallel()
	timeout := "timeout"
	c := &command{exitSignal: syscall.SIGTERM, coreDumped: true}
	tests := []struct {
		name string
		in   *process.ProcessEvent
		want *hutchagent.Event
	}{
		{name: "start", in: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: 4}}},
			want: &hutchagent.Event{Event: &hutchagent.Event_Started{Started: &hutchagent.Started{Pid: 4}}}},
		{name: "stdout", in: &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte("o")}}}},
			want: &hutchagent.Event{Event: &hutchagent.Event_Output{Output: &hutchagent.Output{Data: &hutchagent.Output_Stdout{Stdout: []byte("o")}}}}},
		{name: "stderr", in: &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: []byte("e")}}}},
			want: &hutchagent.Event{Event: &hutchagent.Event_Output{Output: &hutchagent.Output{Data: &hutchagent.Output_Stderr{Stderr: []byte("e")}}}}},
		{name: "end", in: &process.ProcessEvent{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: terminated (core dumped)", Error: &timeout}}},
			want: &hutchagent.Event{Event: &hutchagent.Event_Exited{Exited: &hutchagent.Exited{ExitCode: -1, Signal: 15, CoreDumped: true, TimedOut: true, Status: "signal: terminated (core dumped)"}}}},
		{name: "keepalive", in: &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}},
			want: &hutchagent.Event{Event: &hutchagent.Event_Keepalive{Keepalive: &hutchagent.KeepAlive{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := agentEvent(c, tt.in); got.String() != tt.want.String() {
				t.Errorf("agentEvent = %v, want %v", got, tt.want)
			}
		})
	}
}
