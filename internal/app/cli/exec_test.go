package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

func TestExec(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		wantOut  string
		wantErr  string
		wantReq  *client.ExecRequest
		// wantQuery is the terminal session's query (-i, -t), when not nil.
		wantQuery url.Values
	}{
		{
			name: "stdout", args: []string{"exec", "sb", "--", "echo", "hello", "world"},
			wantOut: "hello world\n",
			wantReq: &client.ExecRequest{Cmd: []string{"echo", "hello", "world"}},
		},
		{name: "without dash", args: []string{"exec", "sb", "echo", "hi"}, wantOut: "hi\n"},
		{name: "command flags after dash", args: []string{"exec", "sb", "--", "echo", "-n", "--x"}, wantOut: "-n --x\n"},
		{name: "stderr", args: []string{"exec", "sb", "--", "warn", "careful"}, wantErr: "careful\n"},
		{name: "exit code", args: []string{"exec", "sb", "--", "exit", "3"}, wantCode: 3},
		{name: "exit code out of range", args: []string{"exec", "sb", "--", "exit", "300"}, wantCode: 255},
		{name: "command not found", args: []string{"exec", "sb", "--", "nosuch"}, wantCode: 127, wantErr: "nosuch: not found\n"},
		{
			name: "timeout", args: []string{"exec", "sb", "--timeout", "30s", "--", "timeout"},
			wantCode: 124, wantErr: "hutch: command timed out after 30s\n",
			wantReq: &client.ExecRequest{Cmd: []string{"timeout"}, TimeoutS: 30},
		},
		{name: "default timeout", args: []string{"exec", "sb", "--", "timeout"}, wantCode: 124, wantErr: "hutch: command timed out after 3m0s\n"},
		{name: "killed by signal", args: []string{"exec", "sb", "--", "kill"}, wantCode: 137},
		{
			name: "options", args: []string{"exec", "sb", "-e", "K=v", "-w", "/tmp", "--user", "root", "--timeout", "1500ms", "--", "pwd"},
			wantOut: "/tmp root\n",
			wantReq: &client.ExecRequest{Cmd: []string{"pwd"}, Cwd: "/tmp", User: "root", TimeoutS: 2, Env: map[string]string{"K": "v"}},
		},
		{name: "env", args: []string{"exec", "sb", "-e", "K=v", "--", "env", "K"}, wantOut: "v\n"},
		{name: "stdin not passed without -i", args: []string{"exec", "sb", "--", "cat"}, stdin: "piped in", wantOut: ""},
		{name: "stdin streams", args: []string{"exec", "sb", "-i", "--", "cat"}, stdin: "piped in", wantOut: "piped in"},
		{name: "binary stdin", args: []string{"exec", "sb", "-i", "--", "cat"}, stdin: "\xff\xfe\x00", wantOut: "\xff\xfe\x00"},
		{name: "stdin with stderr apart", args: []string{"exec", "sb", "--interactive", "--", "warn", "careful"}, wantErr: "careful\n"},
		{name: "stdin and exit code", args: []string{"exec", "-i", "sb", "--", "exit", "3"}, wantCode: 3},
		{
			name: "stdin to the login shell", args: []string{"exec", "-i", "sb"}, stdin: "echo hi\n", wantOut: "echo hi\n",
			wantQuery: url.Values{"tty": {"false"}},
		},
		{
			name: "stdin and options", args: []string{"exec", "-i", "-e", "K=v", "-w", "/tmp", "--user", "root", "sb", "--", "echo", "a b", "it's"},
			wantOut:   "'a b' 'it'\\''s'\n",
			wantQuery: url.Values{"cmd": {`echo 'a b' 'it'\''s'`}, "env": {"K=v"}, "cwd": {"/tmp"}, "user": {"root"}, "tty": {"false"}},
		},
		{name: "-t without a terminal", args: []string{"exec", "-t", "sb"}, wantCode: 2, wantErr: "-t needs a terminal on stdin"},
		{name: "-t with json", args: []string{"exec", "-t", "-o", "json", "sb"}, wantCode: 2, wantErr: "-t does not go with --output json"},
		{name: "stdin in no such sandbox", args: []string{"exec", "-i", "nope", "--", "cat"}, wantCode: 1, wantErr: "hutch: sandbox nope not found\n"},
		{name: "error mid-stream", args: []string{"exec", "sb", "--", "broken"}, wantCode: 1, wantOut: "partial\n", wantErr: "hutch: agent went away\n"},
		{name: "no such sandbox", args: []string{"exec", "nope", "--", "echo"}, wantCode: 1, wantErr: "hutch: sandbox nope not found\n"},
		{name: "no command", args: []string{"exec", "sb"}, wantCode: 2, wantErr: "takes a sandbox ID and a command"},
		{name: "no id before dash", args: []string{"exec", "--", "sb", "ls"}, wantCode: 2, wantErr: "give the sandbox ID, then --"},
		{name: "command flag without dash", args: []string{"exec", "sb", "ls", "-la"}, wantCode: 2, wantErr: "put it after --"},
		{
			name: "json", args: []string{"exec", "-o", "json", "sb", "--", "exit", "4"},
			wantCode: 4, wantOut: `"exit_code": 4`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeDaemon(t)
			f.addSandbox("sb", fakeNow)
			r := f.run(t.Context(), tt.stdin, tt.args...)
			_, execs, _ := f.calls()
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			if tt.wantOut == "" && r.stdout != "" || !strings.Contains(r.stdout, tt.wantOut) {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantOut)
			}
			if tt.wantErr == "" && r.stderr != "" || !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
			if tt.wantReq != nil {
				if len(execs) != 1 || !reflect.DeepEqual(execs[0], *tt.wantReq) {
					t.Errorf("exec requests %+v, want %+v", execs, *tt.wantReq)
				}
			}
			if tt.wantQuery != nil {
				f.mu.Lock()
				ptys := slices.Clone(f.ptys)
				f.mu.Unlock()
				if len(ptys) != 1 || !reflect.DeepEqual(ptys[0], tt.wantQuery) {
					t.Errorf("sessions %v, want one with %v", ptys, tt.wantQuery)
				}
			}
		})
	}
}

func TestExecJSONResult(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	r := f.run(t.Context(), "", "exec", "sb", "-o", "json", "--", "echo", "hi")
	var res client.ExecResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("exit %d, stdout %q: %v", r.code, r.stdout, err)
	}
	if res.Stdout != "hi\n" || res.ExitCode != 0 {
		t.Errorf("result %+v", res)
	}
}

// notifyWriter is a buffer that closes written the first time it is written.
type notifyWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	once    sync.Once
	written chan struct{}
}

func newNotifyWriter() *notifyWriter { return &notifyWriter{written: make(chan struct{})} }

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.written) })
	return w.buf.Write(p)
}

// interrupted runs hutch with args, whose command is "block", and cancels its
// context (Ctrl-C) once the command's first output has reached hutch's
// stdout: that proves output is streamed, not collected until the end.
func interrupted(t *testing.T, f *fakeDaemon, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := newNotifyWriter()
	var stderr bytes.Buffer
	go func() {
		select {
		case <-stdout.written:
			cancel()
		case <-time.After(10 * time.Second):
			t.Error("no output while the command was still running")
			cancel()
		}
	}()
	r := f.runWith(ctx, strings.NewReader(""), stdout, &stderr, &bytes.Buffer{}, &stderr, args...)
	stdout.mu.Lock()
	r.stdout = stdout.buf.String()
	stdout.mu.Unlock()
	return r
}

func TestExecStreamsAndInterrupts(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	r := interrupted(t, f, "exec", "sb", "--", "block")
	if r.code != 130 || r.stdout != "started\n" || r.stderr != "hutch: interrupted\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantOut    string
		wantErr    string
		wantCreate *client.CreateSandboxRequest
		wantExec   *client.ExecRequest
	}{
		{
			name: "echo", args: []string{"run", "--", "echo", "hi"}, wantOut: "hi\n",
			wantCreate: &client.CreateSandboxRequest{},
			wantExec:   &client.ExecRequest{Cmd: []string{"echo", "hi"}},
		},
		{
			name: "command flags need no dash", args: []string{"run", "--cpus", "2", "echo", "-n", "x"}, wantOut: "-n x\n",
			wantCreate: &client.CreateSandboxRequest{CPUs: 2},
			wantExec:   &client.ExecRequest{Cmd: []string{"echo", "-n", "x"}},
		},
		{
			name:  "create and exec flags",
			args:  []string{"run", "--template", "py", "-e", "K=v", "--idle-timeout", "1m", "-w", "/tmp", "--user", "root", "--timeout", "10s", "-i", "--", "env", "K"},
			stdin: "in", wantOut: "v\n",
			wantCreate: &client.CreateSandboxRequest{Template: "py", Env: map[string]string{"K": "v"}, IdleTimeoutS: 60},
			wantExec:   &client.ExecRequest{Cmd: []string{"env", "K"}, Cwd: "/tmp", User: "root", TimeoutS: 10, Stdin: "in"},
		},
		{name: "exit code", args: []string{"run", "--", "exit", "7"}, wantCode: 7},
		{name: "timeout", args: []string{"run", "--timeout", "5s", "--", "timeout"}, wantCode: 124, wantErr: "timed out after 5s"},
		{name: "error mid-stream", args: []string{"run", "--", "broken"}, wantCode: 1, wantOut: "partial\n", wantErr: "hutch: agent went away\n"},
		{name: "no command", args: []string{"run"}, wantCode: 2, wantErr: "takes a command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeDaemon(t)
			r := f.run(t.Context(), tt.stdin, tt.args...)
			created, execs, deleted := f.calls()
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			if r.stdout != tt.wantOut && !(tt.wantOut == "" && r.code != 0) {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantOut)
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
			if tt.wantCreate != nil && (len(created) != 1 || !reflect.DeepEqual(created[0], *tt.wantCreate)) {
				t.Errorf("created %+v, want %+v", created, *tt.wantCreate)
			}
			if tt.wantExec != nil && (len(execs) != 1 || !reflect.DeepEqual(execs[0], *tt.wantExec)) {
				t.Errorf("execs %+v, want %+v", execs, *tt.wantExec)
			}
			if ids := f.sandboxIDs(); len(ids) != 0 {
				t.Errorf("sandboxes left: %v", ids)
			}
			if len(created) != len(deleted) {
				t.Errorf("created %d sandboxes, deleted %d", len(created), len(deleted))
			}
		})
	}
}

func TestRunDeletesOnInterrupt(t *testing.T) {
	f := newFakeDaemon(t)
	r := interrupted(t, f, "run", "--", "block")
	_, _, deleted := f.calls()
	if r.code != 130 || r.stdout != "started\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if ids := f.sandboxIDs(); len(ids) != 0 || len(deleted) != 1 {
		t.Errorf("sandboxes left: %v, deleted %v", ids, deleted)
	}
}

func TestExecStdinInterrupted(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	pr, pw := io.Pipe() // a stdin that never ends, like a terminal
	t.Cleanup(func() { _ = pw.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	var out, errOut bytes.Buffer
	r := f.runWith(ctx, pr, &out, &errOut, &out, &errOut, "exec", "-i", "sb", "--", "cat")
	if r.code != 130 {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, execs, _ := f.calls(); len(execs) != 0 {
		t.Errorf("exec ran: %+v", execs)
	}
}
