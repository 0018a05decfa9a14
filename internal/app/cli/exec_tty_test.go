package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/hutchdev/hutch/client"
)

// pty serves a terminal session as the daemon does, running the fake's
// scripted commands, the first word of cmd: cat (its input back until
// eof; "" too, the login shell), echo ARGS, warn ARGS (stderr), exit N,
// and size (the terminal's size, and again at each resize, until it reads
// a q; then it exits 5). A KILL ends cat and size with 137.
func (f *fakeDaemon) pty(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	f.mu.Lock()
	f.ptys = append(f.ptys, q)
	f.mu.Unlock()
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = conn.CloseNow() }()
	ctx := r.Context()
	tty := q.Get("tty") != "false"
	sendJSON := func(v any) {
		b, _ := json.Marshal(v)
		_ = conn.Write(ctx, websocket.MessageText, b)
	}
	output := func(stream byte, s string) {
		frame := []byte(s)
		if !tty {
			frame = append([]byte{stream}, frame...)
		}
		_ = conn.Write(ctx, websocket.MessageBinary, frame)
	}
	sendJSON(client.PtyStart{Type: client.PtyStarted, Pid: 42})
	words := strings.Fields(q.Get("cmd"))
	if len(words) == 0 {
		words = []string{"cat"}
	}
	exit := 0
	switch words[0] {
	case "echo":
		output(client.PtyStdout, strings.Join(words[1:], " ")+"\n")
	case "warn":
		output(client.PtyStderr, strings.Join(words[1:], " ")+"\n")
	case "exit":
		exit, _ = strconv.Atoi(words[1])
	case "cat", "size":
		if words[0] == "size" {
			output(client.PtyStdout, q.Get("cols")+"x"+q.Get("rows")+"\n")
		}
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary && words[0] == "cat" {
				output(client.PtyStdout, string(data))
			}
			if typ == websocket.MessageBinary && bytes.Contains(data, []byte("q")) && words[0] == "size" {
				exit = 5
				break
			}
			var m client.PtyControl
			if typ == websocket.MessageText && json.Unmarshal(data, &m) == nil {
				if m.Type == client.PtyEOF {
					break
				}
				if m.Type == client.PtySignal && m.Signal == "KILL" {
					exit = 137
					break
				}
				if m.Type == client.PtyResize {
					output(client.PtyStdout, fmt.Sprintf("%dx%d\n", m.Cols, m.Rows))
				}
			}
		}
	}
	sendJSON(client.PtyExit{Type: client.PtyExited, ExecExit: client.ExecExit{ExitCode: exit}})
	_ = conn.Close(websocket.StatusNormalClosure, "")
}

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until b holds want.
func (b *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openPty opens a terminal for the test to play the user's: hutch gets
// its slave as stdin, the test types into its master.
func openPty(t *testing.T, cols, rows uint16) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no terminal to test with: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	fd := int(m.Fd()) // #nosec G115 -- a file descriptor
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	if err == nil {
		err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return m, s
}

// TestExecTTY drives hutch exec -t from a terminal: raw while the session
// lasts (a q goes through at once, no newline), the remote size following
// the local one, the command's exit code hutch's, the terminal restored.
func TestExecTTY(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	master, slave := openPty(t, 100, 30)
	before, err := term.GetState(int(slave.Fd())) // #nosec G115 -- a file descriptor
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	go func() {
		a := &app{
			stdin: slave, stdout: &out, stderr: &errOut,
			lookupEnv: func(string) (string, bool) { return "", false },
			newClient: func() (*client.Client, error) { return client.New(f.srv.URL, fakeKey) },
			now:       func() time.Time { return fakeNow },
		}
		done <- result{code: a.run(ctx, []string{"exec", "-it", "sb", "--", "size"})}
	}()
	out.waitFor(t, "100x30\n")
	if raw, _ := term.GetState(int(slave.Fd())); reflect.DeepEqual(raw, before) { // #nosec G115 -- a file descriptor
		t.Error("the terminal is not in raw mode during the session")
	}
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 123, Row: 45}); err != nil { // #nosec G115 -- a file descriptor
		t.Fatal(err)
	}
	// The test is not in the terminal's session: tell hutch as the kernel
	// would tell a shell's.
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "123x45\n")
	if _, err := master.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 5 || errOut.String() != "" {
		t.Errorf("exit %d, stderr %q; want 5", r.code, errOut.String())
	}
	if after, _ := term.GetState(int(slave.Fd())); !reflect.DeepEqual(after, before) { // #nosec G115 -- a file descriptor
		t.Error("the terminal was not restored")
	}
	f.mu.Lock()
	q := f.ptys[0]
	f.mu.Unlock()
	if q.Get("cols") != "100" || q.Get("rows") != "30" || q.Get("tty") != "" || q.Get("cmd") != "size" {
		t.Errorf("session query %v", q)
	}
}

// TestExecSessionTimeout: --timeout kills a session's command, and hutch
// says so and exits 124, as for a command without -i.
func TestExecSessionTimeout(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	pr, pw := io.Pipe() // a stdin that never ends
	t.Cleanup(func() { _ = pw.Close() })
	var out, errOut bytes.Buffer
	r := f.runWith(t.Context(), pr, &out, &errOut, &out, &errOut, "exec", "-i", "--timeout", "100ms", "sb", "--", "cat")
	if r.code != 124 || !strings.Contains(r.stderr, "timed out after 100ms") {
		t.Errorf("exit %d, stderr %q; want 124", r.code, r.stderr)
	}
}
