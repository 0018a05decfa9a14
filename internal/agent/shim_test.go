package agent

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// testShim is a shim started by the test, which plays the agent.
type testShim struct {
	pid int
	ctl *os.File
	r   *bufio.Reader
}

func startTestShim(t *testing.T) *testShim {
	t.Helper()
	requireRoot(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[1])
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"shim", "agent", "shim"}, &syscall.ProcAttr{
		Files: []uintptr{null.Fd(), null.Fd(), 2, uintptr(fds[1])},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl := os.NewFile(uintptr(fds[0]), "ctl")
	s := &testShim{pid: pid, ctl: ctl, r: bufio.NewReader(ctl)}
	t.Cleanup(func() {
		_ = ctl.Close()
		_ = killDescendants(pid, time.Second)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	})
	return s
}

// run sends a request to start /bin/sh -c script, returning the read end of
// its stdout.
func (s *testShim) run(t *testing.T, script string) *os.File {
	t.Helper()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outW.Close()
	t.Cleanup(func() { _ = outR.Close() })
	req := shimRequest{UID: testUID, GID: testUID, Dir: "/", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=" + defaultPath}}
	if err := sendShimRequest(s.ctl, req, [3]*os.File{null, outW, outW}); err != nil {
		t.Fatal(err)
	}
	return outR
}

func (s *testShim) line(t *testing.T) string {
	t.Helper()
	line, err := s.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read from shim: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func TestShimServesRequestsInTurn(t *testing.T) {
	s := startTestShim(t)
	for _, tt := range []struct {
		script, exit string
	}{
		{"echo $(id -u) $(id -G)", "exit 0"},
		{"exit 3", "exit 768"},
		{"kill -9 $$", "exit 9"},
	} {
		out := s.run(t, tt.script)
		if got := s.line(t); !strings.HasPrefix(got, "pid ") {
			t.Fatalf("first line %q", got)
		}
		if got := s.line(t); got != tt.exit {
			t.Errorf("%s: %q, want %q", tt.script, got, tt.exit)
		}
		if got := s.line(t); got != "idle" {
			t.Errorf("after exit: %q, want idle", got)
		}
		if strings.HasPrefix(tt.script, "echo") {
			b := make([]byte, 64)
			n, _ := out.Read(b)
			if got := string(b[:n]); got != "1000 1000\n" {
				t.Errorf("ids %q", got)
			}
		}
	}
	// A command that cannot start leaves the shim ready.
	_ = s.run(t, "true")
	_ = s.line(t) // pid
	_ = s.line(t) // exit
	_ = s.line(t) // idle
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	if err := sendShimRequest(s.ctl, shimRequest{Argv: []string{"no-such-command"}, Env: []string{"PATH=/bin"}}, [3]*os.File{null, null, null}); err != nil {
		t.Fatal(err)
	}
	if got := s.line(t); !strings.Contains(got, `error exec: "no-such-command": executable file not found`) {
		t.Errorf("got %q", got)
	}
	// EOF while idle: the shim exits 0.
	_ = s.ctl.Close()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(s.pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Errorf("shim exit: %v, %v", err, ws)
	}
}

// When the agent goes away, the shim kills what it supervises and exits.
func TestShimKillsTreeWhenAgentGoes(t *testing.T) {
	s := startTestShim(t)
	out := s.run(t, `setsid sh -c 'echo $$; exec sleep 1000' & sleep 0.1; echo $$; exec sleep 1000`)
	if got := s.line(t); !strings.HasPrefix(got, "pid ") {
		t.Fatalf("first line %q", got)
	}
	b := make([]byte, 64)
	var text string
	for strings.Count(text, "\n") < 2 {
		n, err := out.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		text += string(b[:n])
	}
	pids := parsePids(t, text)
	killOnCleanup(t, pids)
	_ = s.ctl.Close()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(s.pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pids)
}

func TestShimArgs(t *testing.T) {
	if got := Shim([]string{"-uid", "0"}); got != 2 {
		t.Errorf("Shim with arguments = %d, want 2", got)
	}
}

func TestLookPath(t *testing.T) {
	tests := []struct {
		name, path, want string
		fail             bool
	}{
		{name: "sh", path: "/nonexistent:/bin", want: "/bin/sh"},
		{name: "./x", path: "", want: "./x"},
		{name: "/bin/sh", path: "", want: "/bin/sh"},
		{name: "sh", path: "bin:relative", fail: true},
		{name: "no-such-command", path: "/bin", fail: true},
		{name: "passwd", path: "/etc", fail: true}, // not executable
	}
	for _, tt := range tests {
		got, err := lookPath(tt.name, []string{"HOME=/", "PATH=" + tt.path})
		if (err != nil) != tt.fail || (!tt.fail && got != tt.want) {
			t.Errorf("lookPath(%q, PATH=%q) = %q, %v", tt.name, tt.path, got, err)
		}
	}
}

// A shim that ends before starting its command is an internal error, unless
// the sandbox's pids limit refused a fork meanwhile: then the sandbox is at
// its process limit (a shim whose Go runtime cannot make a thread ends so),
// resource_exhausted. Here the shim is a shell that counts a refusal in a
// stand-in for pids.events, or not, and ends.
func TestShimLostAtProcessLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuses bool
		want    connect.Code
	}{
		{"limit refused a fork", true, connect.CodeResourceExhausted},
		{"no refusal", false, connect.CodeInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := filepath.Join(t.TempDir(), "pids.events")
			if err := os.WriteFile(events, []byte("max 3\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			script := "sleep 0.1"
			if tc.refuses {
				script += "; echo 'max 4' > " + events
			}
			s := newServer(Config{Shim: []string{"/bin/sh", "-c", script}}.withDefaults())
			s.shims.pidsEvents = []string{filepath.Join(t.TempDir(), "missing"), events}
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			_, _, err = s.shims.run(shimRequest{Argv: []string{"true"}, Env: []string{"PATH=/bin"}}, [3]*os.File{null, null, null})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != tc.want {
				t.Fatalf("run = %v, want code %v", err, tc.want)
			}
			if tc.refuses && !strings.Contains(ce.Message(), "process limit") {
				t.Errorf("message %q does not name the process limit", ce.Message())
			}
		})
	}
}
