package agent

import (
	"bytes"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
)

// ptyReq starts script with /bin/sh -c on a terminal of cols×rows.
func ptyReq(script string, cols, rows uint32) *connect.Request[process.StartRequest] {
	req := sh(script)
	req.Msg.Pty = &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}
	return req
}

// readPty reads the terminal's output until it holds want, and returns
// it. Only pty data may come: a terminal has no stdout or stderr of its
// own.
func (s *started) readPty(t testing.TB, want string) string {
	t.Helper()
	var out bytes.Buffer
	for !strings.Contains(out.String(), want) {
		ev, ok, err := s.receive()
		if !ok {
			t.Fatalf("stream ended before %q (read %q): %v", want, out.String(), err)
		}
		d := ev.GetData()
		if d.GetStdout() != nil || d.GetStderr() != nil {
			t.Fatalf("output of a terminal came as stdout or stderr: %v", ev)
		}
		out.Write(d.GetPty())
	}
	return out.String()
}

func (a *testAgent) typeIn(t testing.TB, pid uint32, text string) {
	t.Helper()
	_, err := a.process.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{
		Process: pidSelector(pid), Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte(text)}},
	}))
	if err != nil {
		t.Fatalf("input %q: %v", text, err)
	}
}

func (a *testAgent) resize(t testing.TB, pid uint32, cols, rows uint32) {
	t.Helper()
	_, err := a.process.Update(t.Context(), connect.NewRequest(&process.UpdateRequest{
		Process: pidSelector(pid), Pty: &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}},
	}))
	if err != nil {
		t.Fatalf("resize to %dx%d: %v", cols, rows, err)
	}
}

func TestPtyCommand(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		// The shell is the terminal's foreground process group: SIGWINCH
		// reaches its trap.
		p := a.start(t, ptyReq(`test -t 0 && test -t 1 && test -t 2 && echo "tty $TERM"
trap 'echo "winch $(stty size)"' WINCH
stty size; echo ready
read line; echo "got $line"
while [ ! -e "$HOME/stop" ]; do sleep 0.02; done
exit 3`, 100, 30))
		if out := p.readPty(t, "ready"); !strings.Contains(out, "tty xterm-256color") || !strings.Contains(out, "30 100\r\n") {
			t.Fatalf("a command on a terminal of 100x30 printed %q", out)
		}
		a.typeIn(t, p.pid, "hello\n")
		// The terminal echoes what is typed, then the command answers.
		if out := p.readPty(t, "got hello"); !strings.Contains(out, "hello\r\n") {
			t.Errorf("no echo of the input: %q", out)
		}
		a.resize(t, p.pid, 123, 45)
		p.readPty(t, "winch 45 123")
		writeFile(t, a.home+"/stop", "")
		res := p.wait(t)
		if e := res.end; e.GetExitCode() != 3 || !e.GetExited() {
			t.Errorf("end %v, want exit status 3", e)
		}
		if res.stdout.Len() > 0 || res.stderr.Len() > 0 {
			t.Errorf("stdout %q, stderr %q beside the terminal", res.stdout.String(), res.stderr.String())
		}
	})
}

func TestPtyLoginShell(t *testing.T) {
	a := startAgent(t)
	// No cmd: the user's login shell (sh in the test's passwd), as a login
	// shell, its argv[0] "-sh".
	req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{}, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}}})
	p := a.start(t, req)
	a.typeIn(t, p.pid, `echo "zero=$0 $(tty)"; exit 7`+"\n")
	out := p.readPty(t, "zero=-sh /dev/pts/")
	res := p.wait(t)
	if res.end.GetExitCode() != 7 {
		t.Errorf("end %v after %q, want exit status 7", res.end, out)
	}

	// No cmd with args: the login shell given them.
	res = a.run(t, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Args: []string{"-c", `echo "$0"`}}}))
	if got := res.stdout.String(); got != "/bin/sh\n" {
		t.Errorf("the login shell with -c printed %q", got)
	}
}

func TestPtyKill(t *testing.T) {
	forEachPath(t, func(t *testing.T, path func(*Config)) {
		a := startAgent(t, path)
		p := a.start(t, ptyReq(`sleep 1000 & echo "child $!"; wait`, 80, 24))
		out := p.readPty(t, "\r\n")
		pids := parsePids(t, strings.TrimPrefix(strings.TrimSpace(out), "child "))
		killOnCleanup(t, pids)
		a.kill(t, pidSelector(p.pid))
		res := p.wait(t)
		if res.end.GetStatus() != "signal: killed" {
			t.Errorf("end %v, want killed", res.end)
		}
		waitGone(t, pids)
	})
}

func TestPtyErrors(t *testing.T) {
	a := startAgent(t)
	piped := a.start(t, sh("sleep 1000"))
	defer a.kill(t, pidSelector(piped.pid))
	term := a.start(t, ptyReq("sleep 1000", 80, 24))
	defer a.kill(t, pidSelector(term.pid))
	size := func(cols, rows uint32) *process.PTY {
		return &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}
	}
	input := func(pid uint32, in *process.ProcessInput) error {
		_, err := a.process.SendInput(t.Context(), connect.NewRequest(&process.SendInputRequest{Process: pidSelector(pid), Input: in}))
		return err
	}
	update := func(pid uint32, pty *process.PTY) error {
		_, err := a.process.Update(t.Context(), connect.NewRequest(&process.UpdateRequest{Process: pidSelector(pid), Pty: pty}))
		return err
	}
	tests := []struct {
		name    string
		err     error
		code    connect.Code
		message string
	}{
		{"start with a size of 0", func() error { _, err := a.tryRun(t.Context(), ptyReq("true", 0, 24)); return err }(), connect.CodeInvalidArgument, "1 to 65535 columns and rows, got 0x24"},
		{"start without a size", func() error {
			req := sh("true")
			req.Msg.Pty = &process.PTY{}
			_, err := a.tryRun(t.Context(), req)
			return err
		}(), connect.CodeInvalidArgument, "got 0x0"},
		{"resize without a terminal", update(piped.pid, size(100, 40)), connect.CodeFailedPrecondition, "has no terminal to resize"},
		{"update without a size", update(term.pid, nil), connect.CodeInvalidArgument, "pty.size"},
		{"resize to 0", update(term.pid, size(100, 0)), connect.CodeInvalidArgument, "got 100x0"},
		{"resize an unknown process", update(999999, size(100, 40)), connect.CodeNotFound, "process 999999 not found"},
		{"stdin to a terminal", input(term.pid, &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}), connect.CodeFailedPrecondition, "send its input as pty"},
		{"pty input without a terminal", input(piped.pid, &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("x")}}), connect.CodeFailedPrecondition, "has no terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if connect.CodeOf(tt.err) != tt.code || !strings.Contains(message(tt.err), tt.message) {
				t.Errorf("err = %v, want %v containing %q", tt.err, tt.code, tt.message)
			}
		})
	}
}

// TestPtyOutputAfterExit: what the command wrote just before it ended
// comes whole before its end, though the master reads EIO, not EOF, once
// the terminal is closed.
func TestPtyOutputAfterExit(t *testing.T) {
	a := startAgent(t)
	for range 10 {
		p := a.start(t, ptyReq("head -c 100000 /dev/zero | tr '\\0' x; echo end", 80, 24))
		var out bytes.Buffer
		var end *process.ProcessEvent_EndEvent
		for end == nil {
			ev, ok, err := p.receive()
			if !ok {
				t.Fatalf("stream ended without an end event: %v", err)
			}
			out.Write(ev.GetData().GetPty())
			end = ev.GetEnd()
		}
		if n := bytes.Count(out.Bytes(), []byte("x")); n != 100000 || !bytes.HasSuffix(out.Bytes(), []byte("end\r\n")) {
			t.Fatalf("read %d x's of 100000, ending %q", n, out.Bytes()[max(out.Len()-10, 0):])
		}
	}
}
