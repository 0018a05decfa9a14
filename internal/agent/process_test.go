package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

func TestStart(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		t.Setenv("HUTCH_AGENT_SECRET", "hidden")
		t.Setenv("AGENT_VISIBLE", "shown")
		a := startAgent(t, path)
		if err := os.Mkdir(filepath.Join(a.home, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}

		withEnv := sh(`echo "$FOO $HOME $USER $LOGNAME $AGENT_VISIBLE ${HUTCH_AGENT_SECRET:-unset}"`)
		withEnv.Msg.Process.Envs = map[string]string{"FOO": "bar", "AGENT_VISIBLE": "overridden"}
		inSub := sh("pwd")
		sub := "sub"
		inSub.Msg.Process.Cwd = &sub
		inRoot := sh("pwd")
		slash := "/"
		inRoot.Msg.Process.Cwd = &slash
		direct := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "echo", Args: []string{"a b", "c"}}})

		tests := []struct {
			name       string
			req        *connect.Request[process.StartRequest]
			stdout     string
			stderr     string
			exitCode   int32
			exited     bool
			status     string
			stdoutFunc func(a *testAgent) string
		}{
			{name: "stdout", req: sh("echo hello"), stdout: "hello\n", exited: true, status: "exit status 0"},
			{name: "stderr", req: sh("echo oops >&2"), stderr: "oops\n", exited: true, status: "exit status 0"},
			{name: "exit code", req: sh("echo out; exit 3"), stdout: "out\n", exitCode: 3, exited: true, status: "exit status 3"},
			{name: "killed by signal", req: sh("kill -9 $$"), exitCode: -1, status: "signal: killed"},
			{name: "path lookup and args", req: direct, stdout: "a b c\n", exited: true, status: "exit status 0"},
			{
				name: "environment", req: withEnv, exited: true, status: "exit status 0",
				stdoutFunc: func(a *testAgent) string { return "bar " + a.home + " user user overridden unset\n" },
			},
			{
				name: "default cwd is home", req: sh("pwd"), exited: true, status: "exit status 0",
				stdoutFunc: func(a *testAgent) string { return a.home + "\n" },
			},
			{
				name: "relative cwd is in home", req: inSub, exited: true, status: "exit status 0",
				stdoutFunc: func(a *testAgent) string { return filepath.Join(a.home, "sub") + "\n" },
			},
			{name: "absolute cwd", req: inRoot, stdout: "/\n", exited: true, status: "exit status 0"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := a.run(t, tt.req)
				want := tt.stdout
				if tt.stdoutFunc != nil {
					want = tt.stdoutFunc(a)
				}
				if got := res.stdout.String(); got != want {
					t.Errorf("stdout = %q, want %q", got, want)
				}
				if got := res.stderr.String(); got != tt.stderr {
					t.Errorf("stderr = %q, want %q", got, tt.stderr)
				}
				if res.pid == 0 {
					t.Error("no pid in the start event")
				}
				e := res.end
				if e.GetExitCode() != tt.exitCode || e.GetExited() != tt.exited || e.GetStatus() != tt.status || e.Error != nil {
					t.Errorf("end = %v, want exit code %d, exited %v, status %q, no error", e, tt.exitCode, tt.exited, tt.status)
				}
			})
		}
	})
}

// TestStartOneProcessor checks that a GOMAXPROCS=1 the runtime gave the
// agent with agentv1.OneProcessor stays the agent's, on every path a
// command starts by, and that one the sandbox's environment sets (no
// OneProcessor beside it) reaches commands.
func TestStartOneProcessor(t *testing.T) {
	for _, tt := range []struct {
		name, gomaxprocs, mark, want string
	}{
		{name: "the runtime's", gomaxprocs: "1", mark: "1", want: "unset unset\n"},
		{name: "the sandbox's", gomaxprocs: "3", want: "3 unset\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, path func(*Config)) {
				t.Setenv("GOMAXPROCS", tt.gomaxprocs)
				if tt.mark != "" {
					t.Setenv(agentv1.OneProcessor, tt.mark)
				}
				a := startAgent(t, path)
				res := a.run(t, sh(`echo "${GOMAXPROCS:-unset} ${`+agentv1.OneProcessor+`:-unset}"`))
				if got := res.stdout.String(); got != tt.want {
					t.Errorf("a command saw %q, want %q", got, tt.want)
				}
			})
		})
	}
}

func TestStartErrors(t *testing.T) {
	a := startAgent(t)
	writeFile(t, filepath.Join(a.home, "file"), "x")
	missing, file := "missing", "file"

	tests := []struct {
		name    string
		req     *connect.Request[process.StartRequest]
		code    connect.Code
		message string
	}{
		{name: "command not found", req: connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "no-such-command"}}), code: connect.CodeInvalidArgument, message: "executable file not found"},
		{name: "unknown user", req: asUser(sh("true"), "nobody-here"), code: connect.CodeInvalidArgument, message: `unknown user "nobody-here"`},
		{name: "missing cwd", req: func() *connect.Request[process.StartRequest] { r := sh("true"); r.Msg.Process.Cwd = &missing; return r }(), code: connect.CodeInvalidArgument, message: "working directory " + filepath.Join(a.home, "missing") + ": no such file or directory"},
		{name: "cwd is a file", req: func() *connect.Request[process.StartRequest] { r := sh("true"); r.Msg.Process.Cwd = &file; return r }(), code: connect.CodeInvalidArgument, message: "is not a directory"},
		{name: "bad env", req: func() *connect.Request[process.StartRequest] {
			r := sh("true")
			r.Msg.Process.Envs = map[string]string{"A=B": "c"}
			return r
		}(), code: connect.CodeInvalidArgument, message: "invalid environment variable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.tryRun(t.Context(), tt.req)
			if connect.CodeOf(err) != tt.code || !strings.Contains(message(err), tt.message) {
				t.Errorf("err = %v, want %v containing %q", err, tt.code, tt.message)
			}
		})
	}
	if list := a.list(t); len(list) != 0 {
		t.Errorf("failed starts left processes: %v", list)
	}
}

func TestUserSwitching(t *testing.T) {
	a := startAgent(t)
	tests := []struct {
		user string
		want string
		home string
	}{
		{user: "", want: "1000 1000 1000", home: a.home},
		{user: "user", want: "1000 1000 1000", home: a.home},
		{user: "root", want: "0 0 0", home: a.root},
	}
	for _, tt := range tests {
		t.Run("user="+tt.user, func(t *testing.T) {
			res := a.run(t, asUser(sh(`echo $(id -u) $(id -g) $(id -G); touch made-here`), tt.user))
			if got := strings.TrimSpace(res.stdout.String()); got != tt.want {
				t.Errorf("ids = %q (stderr %q), want %q", got, res.stderr.String(), tt.want)
			}
			fi, err := os.Stat(filepath.Join(tt.home, "made-here"))
			if err != nil {
				t.Fatal(err)
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; fmt.Sprint(uid) != strings.Fields(tt.want)[0] {
				t.Errorf("file made by the process belongs to uid %d", uid)
			}
		})
	}
	t.Run("no access to root's files", func(t *testing.T) {
		res := a.run(t, sh("cat /proc/1/environ"))
		if res.end.GetExitCode() == 0 {
			t.Error("uid 1000 read /proc/1/environ")
		}
	})
}

func TestStdin(t *testing.T) {
	a := startAgent(t)

	t.Run("send input and close", func(t *testing.T) {
		p := a.start(t, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "cat"}}))
		for _, s := range []string{"hello ", "world"} {
			if _, err := a.process.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{
				Process: pidSelector(p.pid), Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(s)}},
			})); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.process.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSelector(p.pid)})); err != nil {
			t.Fatal(err)
		}
		res := p.wait(t)
		if res.stdout.String() != "hello world" || res.end.GetExitCode() != 0 {
			t.Errorf("stdout %q, end %v", res.stdout.String(), res.end)
		}
	})

	t.Run("stream input", func(t *testing.T) {
		tag := "streamed"
		req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "cat"}, Tag: &tag})
		p := a.start(t, req)
		in := a.process.StreamInput(t.Context())
		msgs := []*process.StreamInputRequest{
			{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: tagSelector(tag)}}},
			{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("one\n")}}}}},
			{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}},
			{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}},
		}
		for _, m := range msgs {
			if err := in.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := in.CloseAndReceive(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.process.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: tagSelector(tag)})); err != nil {
			t.Fatal(err)
		}
		if res := p.wait(t); res.stdout.String() != "one\ntwo\n" {
			t.Errorf("stdout %q", res.stdout.String())
		}
	})

	t.Run("without stdin", func(t *testing.T) {
		no := false
		p := a.start(t, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "cat; echo eof; sleep 0.2"}}, Stdin: &no}))
		if got := p.readLine(t); got != "eof" {
			t.Errorf("stdout %q, want eof at once", got)
		}
		_, err := a.process.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{
			Process: pidSelector(p.pid), Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}},
		}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Errorf("SendInput without stdin: %v, want failed precondition", err)
		}
		p.wait(t)
	})
}

func TestSIGKILLKillsTree(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		// The two pids come in whichever order a loaded host prints
		// them, in one output event or two.
		p := a.start(t, sh(`setsid sh -c 'echo $$; exec sleep 1000' &
(sh -c 'echo $$; exec sleep 1000' &) ;
exec sleep 1000`))
		pids := p.readPids(t, 2)
		killOnCleanup(t, pids)
		if len(pids) != 2 {
			t.Fatalf("pids %v", pids)
		}
		a.kill(t, pidSelector(p.pid))
		res := p.wait(t)
		if res.end.GetStatus() != "signal: killed" || res.end.GetExited() || res.end.GetExitCode() != -1 || res.end.Error != nil {
			t.Errorf("end = %v", res.end)
		}
		waitGone(t, append(pids, int(p.pid)))
	})
}

func TestSIGTERMReachesMainOnly(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		tag := "term"
		req := sh(`sh -c 'echo $$; exec sleep 1000' & sleep 0.1; exec sleep 1000`)
		req.Msg.Tag = &tag
		p := a.start(t, req)
		child := parsePids(t, p.readLine(t))
		killOnCleanup(t, child)
		if _, err := a.process.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{
			Process: pidSelector(p.pid), Signal: process.Signal_SIGNAL_SIGTERM,
		})); err != nil {
			t.Fatal(err)
		}
		if res := p.wait(t); res.end.GetStatus() != "signal: terminated" {
			t.Errorf("end = %v", res.end)
		}
		if !alive(child[0]) {
			t.Error("SIGTERM reached the child")
		}
		// The leftover child is still reachable by tag.
		a.kill(t, tagSelector(tag))
		waitGone(t, child)
	})
}

func TestBackgroundProcessKeepsPipes(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		tag := "bg"
		// The main waits until the background process has written its
		// pid (then a mark), so that the pid is in the pipe before the
		// main ends, however loaded the host.
		mark := filepath.Join(a.home, "mark")
		req := sh(`sh -c 'echo $$ >&2; echo > ` + mark + `; exec sleep 1000' &
while [ ! -s ` + mark + ` ]; do sleep 0.01; done; echo done`)
		req.Msg.Tag = &tag
		began := time.Now()
		res := a.run(t, req)
		took := time.Since(began)
		if res.stdout.String() != "done\n" || res.end.GetStatus() != "exit status 0" {
			t.Errorf("stdout %q, end %v", res.stdout.String(), res.end)
		}
		// Far below the 1000 s the background process would hold it.
		if took > 10*time.Second {
			t.Errorf("the stream ended %s after start: the background process held it open", took)
		}
		t.Logf("start to end: %s", took)
		pids := parsePids(t, res.stderr.String())
		killOnCleanup(t, pids)
		if len(pids) != 1 || !alive(pids[0]) {
			t.Fatalf("background process %v should run on", pids)
		}
		if list := a.list(t); len(list) != 0 {
			t.Errorf("List shows an ended command: %v", list)
		}
		// Its tag is free again, and SIGKILL by tag kills what it left behind.
		a.run(t, func() *connect.Request[process.StartRequest] { r := sh("true"); r.Msg.Tag = &tag; return r }())
		a.kill(t, tagSelector(tag))
		waitGone(t, pids)
	})
}

func TestConnect(t *testing.T) {
	a := startAgent(t)
	p := a.start(t, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "cat"}}))

	stream, err := a.process.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: pidSelector(p.pid)}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	if !stream.Receive() || stream.Msg().GetEvent().GetStart().GetPid() != p.pid {
		t.Fatalf("first event %v, %v", stream.Msg(), stream.Err())
	}
	if _, err := a.process.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{
		Process: pidSelector(p.pid), Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("ping\n")}},
	})); err != nil {
		t.Fatal(err)
	}
	// Both the Start stream and the Connect stream see the output.
	if got := p.readLine(t); got != "ping" {
		t.Errorf("start stream read %q", got)
	}
	if _, err := a.process.CloseStdin(t.Context(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSelector(p.pid)})); err != nil {
		t.Fatal(err)
	}
	res := &result{}
	for stream.Receive() {
		collect(res, stream.Msg().GetEvent())
	}
	if stream.Err() != nil || res.stdout.String() != "ping\n" || res.end.GetStatus() != "exit status 0" {
		t.Errorf("connect stream: stdout %q, end %v, err %v", res.stdout.String(), res.end, stream.Err())
	}
	p.wait(t)

	for _, sel := range []*process.ProcessSelector{pidSelector(p.pid), tagSelector("nope")} {
		stream, err := a.process.Connect(t.Context(), connect.NewRequest(&process.ConnectRequest{Process: sel}))
		if err == nil {
			for stream.Receive() {
			}
			err = stream.Err()
		}
		if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(message(err), "not found") {
			t.Errorf("connect to %v: %v, want not found", sel, err)
		}
	}
}

// A client that goes away does not stop its process, and the output nobody
// reads does not block it.
func TestStartClientGoesAway(t *testing.T) {
	a := startAgent(t)
	ctx, cancel := context.WithCancel(t.Context())
	marker := filepath.Join(a.home, "finished")
	stream, err := a.process.Start(ctx, sh("sleep 0.2; head -c 5000000 /dev/zero; touch "+marker))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatal(stream.Err())
	}
	cancel()
	_ = stream.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process did not finish after its client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestListAndTags(t *testing.T) {
	a := startAgent(t)
	tagA, tagB := "a", "b"
	reqA := sh("exec sleep 1000")
	reqA.Msg.Tag = &tagA
	reqB := sh("exec sleep 1000")
	reqB.Msg.Tag = &tagB
	pa := a.start(t, reqA)
	pb := a.start(t, reqB)
	untagged := a.start(t, sh("exec sleep 1000"))

	list := a.list(t)
	var got []string
	for _, info := range list {
		got = append(got, fmt.Sprintf("%d:%s:%s", info.GetPid(), info.GetTag(), info.GetConfig().GetCmd()))
	}
	want := []string{fmt.Sprintf("%d:a:/bin/sh", pa.pid), fmt.Sprintf("%d:b:/bin/sh", pb.pid), fmt.Sprintf("%d::/bin/sh", untagged.pid)}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}

	dup := sh("true")
	dup.Msg.Tag = &tagA
	if _, err := a.tryRun(t.Context(), dup); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("duplicate tag: %v, want already exists", err)
	}

	for _, p := range []*started{pa, pb, untagged} {
		a.kill(t, pidSelector(p.pid))
		p.wait(t)
	}
	if list := a.list(t); len(list) != 0 {
		t.Errorf("List after kill = %v", list)
	}
	if res := a.run(t, dup); res.end.GetExitCode() != 0 {
		t.Errorf("tag not reusable: %v", res.end)
	}
	if _, err := a.process.SendSignal(t.Context(), connect.NewRequest(&process.SendSignalRequest{
		Process: pidSelector(999999), Signal: process.Signal_SIGNAL_SIGKILL,
	})); connect.CodeOf(err) != connect.CodeNotFound || message(err) != "process 999999 not found" {
		t.Errorf("signal unknown pid: %v", err)
	}
}

func (a *testAgent) list(t testing.TB) []*process.ProcessInfo {
	t.Helper()
	resp, err := a.process.List(t.Context(), connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.GetProcesses()
}

func TestFloodOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MiB")
	}
	a := startAgent(t)
	stream, err := a.process.Start(t.Context(), sh("head -c 200M /dev/zero; echo end >&2"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	var n int
	var end *process.ProcessEvent_EndEvent
	var stderr string
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		n += len(ev.GetData().GetStdout())
		stderr += string(ev.GetData().GetStderr())
		if ev.GetEnd() != nil {
			end = ev.GetEnd()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 200<<20 || stderr != "end\n" || end.GetExitCode() != 0 {
		t.Errorf("got %d bytes, stderr %q, end %v", n, stderr, end)
	}
}

func TestKeepAlive(t *testing.T) {
	a := startAgent(t, func(c *Config) { c.KeepAlive = 30 * time.Millisecond })
	res := a.run(t, sh("sleep 0.3; echo hi"))
	if res.keepalives < 3 || res.stdout.String() != "hi\n" {
		t.Errorf("%d keepalives, stdout %q", res.keepalives, res.stdout.String())
	}
}

func TestShutdownKillsTrees(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		p := a.start(t, sh(`setsid sh -c 'echo $$; exec sleep 1000' & sleep 0.1; echo; exec sleep 1000`))
		pids := parsePids(t, p.readLine(t))
		killOnCleanup(t, pids)
		began := time.Now()
		if err := a.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("shutdown took %s", took)
		}
		waitGone(t, append(pids, int(p.pid)))
		if _, err := os.Stat(a.socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind: %v", err)
		}
	})
}

// Start → End of `true`, measured through the daemon's client, in the direct slot and
// under a shim, against a bare fork+exec+wait of /bin/true.
func TestStartLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("measures latency")
	}
	const runs = 200
	type row struct{ back, paced []time.Duration }
	measure := func(once func() time.Duration) row {
		var r row
		for _, pause := range []time.Duration{0, 5 * time.Millisecond} {
			d := make([]time.Duration, runs)
			for i := range d {
				time.Sleep(pause)
				d[i] = once()
			}
			slices.Sort(d)
			if pause == 0 {
				r.back = d
			} else {
				r.paced = d
			}
		}
		return r
	}
	// Before any agent runs: its reaper would reap these children.
	bare := measure(func() time.Duration {
		began := time.Now()
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		return time.Since(began)
	})
	agent := func(configure ...func(*Config)) row {
		a := startAgent(t, configure...)
		defer func() { _ = a.stop() }()
		cmd := agentclient.Command{Argv: []string{"/bin/true"}}
		for range 10 { // warm up connections and caches
			a.runCmd(t, cmd)
		}
		return measure(func() time.Duration {
			began := time.Now()
			if res := a.runCmd(t, cmd); res.end.GetExitCode() != 0 {
				t.Fatalf("end = %v", res.end)
			}
			return time.Since(began)
		})
	}
	direct := agent()
	shim := agent(func(c *Config) { c.noDirect = true })
	t.Logf("Start→End of /bin/true, %d runs, p50/p90, back to back | 5ms apart:", runs)
	for _, r := range []struct {
		name string
		row
	}{{"direct slot", direct}, {"under a shim", shim}, {"bare fork+exec+wait", bare}} {
		t.Logf("  %-20s %9s/%-9s | %9s/%s", r.name, r.back[runs/2], r.back[runs*9/10], r.paced[runs/2], r.paced[runs*9/10])
	}
}

// An output keeps its newest events within its byte budget, and always the
// newest one.
func TestOutputKeepsNewest(t *testing.T) {
	data := func(s string) *process.ProcessEvent {
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{
			Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(s)}}}}
	}
	o := newOutput(10)
	kept := func() []string {
		var got []string
		evs, _ := o.replay(true)
		for _, ev := range evs {
			got = append(got, string(ev.GetData().GetStdout()))
		}
		return got
	}
	for _, s := range []string{"aaaa", "bbbb", "cccc"} {
		o.publish(data(s))
	}
	if got := kept(); !slices.Equal(got, []string{"bbbb", "cccc"}) {
		t.Errorf("kept %v, want [bbbb cccc]", got)
	}
	o.publish(data("dddddddddddddddd"))
	if got := kept(); !slices.Equal(got, []string{"dddddddddddddddd"}) {
		t.Errorf("kept %v, want only the newest", got)
	}
	o.end(&process.ProcessEvent{})
	o.publish(data("late"))
	if evs, sub := o.replay(true); len(evs) != 1 || sub != nil {
		t.Errorf("after the end: kept %d events, subscriber %v", len(evs), sub)
	}
}

// A connection that never sends a request (an HTTP client's spare, dialled
// while another connection came free) does not hold up shutdown: net/http's
// Shutdown counts such a connection idle only once it is 5 s old.
func TestShutdownWithUnusedConnection(t *testing.T) {
	a := startAgent(t)
	conn, err := net.Dial("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	if err := a.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("shutdown took %s with an unused connection open", took)
	}
}

// Connect-Timeout-Ms on envd's Start is the command's lifetime, as in envd:
// at the deadline the stream ends with deadline_exceeded and the command's
// whole tree is SIGKILLed.
func TestStartConnectTimeoutIsLifetime(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		// Long enough for the child to print its pid on a loaded host.
		const lifetime = 2 * time.Second
		req := sh(`sh -c 'echo $$; exec sleep 1000' & exec sleep 1000`)
		req.Header().Set("Connect-Timeout-Ms", strconv.Itoa(int(lifetime.Milliseconds())))
		began := time.Now()
		p := a.start(t, req)
		pids := append(parsePids(t, p.readLine(t)), int(p.pid))
		killOnCleanup(t, pids)
		_, err := p.rest(nil)
		if connect.CodeOf(err) != connect.CodeDeadlineExceeded {
			t.Errorf("stream ended with %v, want deadline_exceeded", err)
		}
		if took := time.Since(began); took < lifetime-100*time.Millisecond {
			t.Errorf("stream ended after %s, before the %s deadline", took, lifetime)
		}
		waitGone(t, pids)
		// The agent sees the end a moment after the processes are gone.
		for deadline := time.Now().Add(5 * time.Second); len(a.list(t)) != 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("List after the deadline = %v", a.list(t))
			}
		}
	})
}

// On Connect, Connect-Timeout-Ms bounds the stream only.
func TestConnectTimeoutEndsStreamOnly(t *testing.T) {
	a := startAgent(t)
	p := a.start(t, sh("exec sleep 1000"))
	killOnCleanup(t, []int{int(p.pid)})
	req := connect.NewRequest(&process.ConnectRequest{Process: pidSelector(p.pid)})
	req.Header().Set("Connect-Timeout-Ms", "100")
	stream, err := a.process.Connect(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	_ = stream.Close()
	if connect.CodeOf(stream.Err()) != connect.CodeDeadlineExceeded {
		t.Errorf("connect stream ended with %v, want deadline_exceeded", stream.Err())
	}
	time.Sleep(100 * time.Millisecond) // a kill would have landed by now
	if !alive(int(p.pid)) {
		t.Fatal("the timeout of a Connect stream killed the process")
	}
	a.kill(t, pidSelector(p.pid))
	p.wait(t)
}

func TestProcessLifetime(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration
		fails  bool
	}{
		{header: "", want: 0},
		{header: "0", want: 0},
		{header: "60000", want: time.Minute},
		{header: "-1", fails: true},
		{header: "soon", fails: true},
		{header: "12345678901", fails: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.header), func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("Connect-Timeout-Ms", tt.header)
			}
			got, err := processLifetime(h)
			if got != tt.want || (err != nil) != tt.fails || (err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument) {
				t.Errorf("processLifetime = %s, %v; want %s, failing %v", got, err, tt.want, tt.fails)
			}
		})
	}
}
