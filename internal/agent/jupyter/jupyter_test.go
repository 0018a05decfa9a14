package jupyter

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// python is Debian's interpreter, which has python3-ipykernel; a python3
// found on PATH may be another one without it.
const python = "/usr/bin/python3"

// kernel is an ipykernel process started for a test, as the test's child.
type kernel struct {
	ci  ConnectionInfo
	cmd *exec.Cmd
}

func startKernel(tb testing.TB) *kernel {
	tb.Helper()
	if out, err := exec.Command(python, "-c", "import ipykernel").CombinedOutput(); err != nil {
		tb.Skipf("needs %s with ipykernel (Debian's python3-ipykernel): %v: %s", python, err, out)
	}
	dir := tb.TempDir()
	ci, err := NewConnectionInfo()
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "kernel.json")
	if err := ci.WriteFile(path, os.Getuid(), os.Getgid()); err != nil {
		tb.Fatal(err)
	}
	logPath := filepath.Join(dir, "kernel.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(python, "-m", "ipykernel_launcher", "-f", path)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "IPYTHONDIR=" + filepath.Join(dir, "ipython"), "LANG=C.UTF-8"}
	// Files rather than buffers, so that os/exec starts no copying
	// goroutines to upset the goroutine census; its own process group,
	// so that no signal meant for the kernel reaches the test.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if tb.Failed() {
			out, _ := os.ReadFile(logPath)
			tb.Logf("kernel output:\n%s", out)
		}
	})
	return &kernel{ci: ci, cmd: cmd}
}

func connect(tb testing.TB, k *kernel) *Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := Dial(ctx, k.ci)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	if err := c.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	return c
}

// run executes code and returns its reply and output, failing the test on
// an error of Execute.
func run(t *testing.T, c *Client, code string) (Reply, []Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var events []Event
	reply, err := c.Execute(ctx, code, func(ev Event) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return reply, events
}

// only returns the single event of kind, failing the test if there is not
// exactly one.
func only(t *testing.T, events []Event, kind EventKind) Event {
	t.Helper()
	var found []Event
	for _, ev := range events {
		if ev.Kind == kind {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s event, got %+v", kind, events)
	}
	return found[0]
}

// spin runs an endless loop in the kernel and calls interrupt once the
// loop has started; it returns what Execute returned.
func spin(t *testing.T, c *Client, interrupt func()) (Reply, []Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var events []Event
	reply, err := c.Execute(ctx, "print('spinning', flush=True)\nwhile True: pass", func(ev Event) error {
		events = append(events, ev)
		if ev.Kind == EventStdout && strings.Contains(ev.Text, "spinning") {
			interrupt()
		}
		return nil
	})
	return reply, events, err
}

func wantKeyboardInterrupt(t *testing.T, reply Reply, events []Event, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if ev := only(t, events, EventError); ev.Error.Name != "KeyboardInterrupt" {
		t.Errorf("error event: %+v", ev.Error)
	}
	if reply.Status != "error" || reply.Error == nil || reply.Error.Name != "KeyboardInterrupt" {
		t.Errorf("reply: %+v", reply)
	}
}

func TestKernel(t *testing.T) {
	k := startKernel(t)
	before := runtime.NumGoroutine()
	c := connect(t, k)

	t.Run("result", func(t *testing.T) {
		first, events := run(t, c, "x = 41")
		if first.Status != "ok" || len(events) != 0 {
			t.Fatalf("x = 41: %+v, %+v", first, events)
		}
		reply, events := run(t, c, "x + 1")
		ev := only(t, events, EventResult)
		if ev.Data["text/plain"] != "42" || !ev.IsMain {
			t.Errorf("result: %+v", ev)
		}
		if reply.Status != "ok" || reply.ExecutionCount != first.ExecutionCount+1 || ev.ExecutionCount != reply.ExecutionCount {
			t.Errorf("execution counts: %d, then reply %+v and result %d", first.ExecutionCount, reply, ev.ExecutionCount)
		}
	})

	t.Run("streams", func(t *testing.T) {
		_, events := run(t, c, "print('a'); import sys; print('b', file=sys.stderr)")
		want := []Event{{Kind: EventStdout, Text: "a\n"}, {Kind: EventStderr, Text: "b\n"}}
		if !slices.EqualFunc(events, want, func(a, b Event) bool { return a.Kind == b.Kind && a.Text == b.Text }) {
			t.Errorf("got %+v, want %+v", events, want)
		}
	})

	t.Run("error", func(t *testing.T) {
		reply, events := run(t, c, "1/0")
		ev := only(t, events, EventError)
		if ev.Error.Name != "ZeroDivisionError" || len(ev.Error.Traceback) == 0 {
			t.Errorf("error event: %+v", ev.Error)
		}
		if reply.Status != "error" || reply.Error == nil || reply.Error.Name != "ZeroDivisionError" {
			t.Errorf("reply: %+v", reply)
		}
	})

	t.Run("display", func(t *testing.T) {
		_, events := run(t, c, "from IPython.display import HTML, display; display(HTML('<b>x</b>'))")
		ev := only(t, events, EventDisplay)
		if ev.Data["text/html"] != "<b>x</b>" || ev.IsMain || ev.Update {
			t.Errorf("display: %+v", ev)
		}
	})

	t.Run("clear", func(t *testing.T) {
		_, events := run(t, c, "from IPython.display import clear_output; clear_output(wait=True)")
		if ev := only(t, events, EventClear); !ev.Wait {
			t.Errorf("clear: %+v", ev)
		}
	})

	t.Run("SIGINT", func(t *testing.T) {
		var once sync.Once
		reply, events, err := spin(t, c, func() {
			once.Do(func() {
				if err := k.cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Error(err)
				}
			})
		})
		wantKeyboardInterrupt(t, reply, events, err)
	})

	t.Run("Interrupt", func(t *testing.T) {
		// From another goroutine, as a timeout would.
		var once sync.Once
		interrupted := make(chan error, 1)
		reply, events, err := spin(t, c, func() {
			once.Do(func() {
				go func() { interrupted <- c.Interrupt(t.Context()) }()
			})
		})
		wantKeyboardInterrupt(t, reply, events, err)
		if err := <-interrupted; err != nil {
			t.Errorf("Interrupt: %v", err)
		}
	})

	t.Run("state survives", func(t *testing.T) {
		_, events := run(t, c, "x")
		if ev := only(t, events, EventResult); ev.Data["text/plain"] != "41" {
			t.Errorf("x after interrupts: %+v", ev)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		start := time.Now()
		if _, err := c.Execute(ctx, "1", nil); !errors.Is(err, context.Canceled) {
			t.Errorf("Execute with a cancelled context: %v", err)
		}
		ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if _, err := c.Execute(ctx, "import time; time.sleep(0.5)", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Execute past its deadline: %v", err)
		}
		if d := time.Since(start); d > 400*time.Millisecond {
			t.Errorf("Execute returned %v after its context ended", d)
		}
		// The late reply and output of the abandoned request are ignored.
		if _, events := run(t, c, "x"); only(t, events, EventResult).Data["text/plain"] != "41" {
			t.Errorf("after a cancelled Execute: %+v", events)
		}
	})

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(t.Context(), "1", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Execute after Close: %v", err)
	}
	checkGoroutines(t, before)
}

// A kernel killed while Execute waits on it makes Execute fail at once:
// its TCP connections close. (A kernel that hangs without dying is only
// bounded by the context.)
func TestKernelKilled(t *testing.T) {
	k := startKernel(t)
	c := connect(t, k)
	var killed time.Time
	_, _, err := spin(t, c, func() {
		if killed.IsZero() {
			killed = time.Now()
			if err := k.cmd.Process.Kill(); err != nil {
				t.Error(err)
			}
		}
	})
	if !errors.Is(err, ErrKernelGone) {
		t.Fatalf("Execute on a killed kernel: %v", err)
	}
	if d := time.Since(killed); d > 2*time.Second {
		t.Errorf("Execute returned %v after the kill", d)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is open after the kernel died")
	}
	if !errors.Is(c.Err(), ErrKernelGone) {
		t.Errorf("Err: %v", c.Err())
	}
}

// checkGoroutines waits a little for the goroutine count to come back to
// before, then reports what is left.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:n])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkExecute measures the round trip of a trivial execute_request in
// a warm kernel; it reports the median as well as the mean
// (go test -bench . -benchtime 200x).
func BenchmarkExecute(b *testing.B) {
	c := connect(b, startKernel(b))
	ctx := context.Background()
	for range 10 {
		if _, err := c.Execute(ctx, "1+1", nil); err != nil {
			b.Fatal(err)
		}
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := c.Execute(ctx, "1+1", nil); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-µs")
}

// Output a kernel sends after its idle status is Execute's with Linger
// (as Deno's execute_result can be), and lost without.
func TestLinger(t *testing.T) {
	c := connect(t, startKernel(t))
	late := func(s string) string {
		return "import threading\nthreading.Timer(" + s + ", lambda: print('late', flush=True)).start()"
	}
	// Half a second late: a loaded machine's kernel may take 50 ms to go
	// idle after the cell, and the output would then come before it.
	if _, events := run(t, c, late("0.5")); len(events) != 0 {
		t.Errorf("without Linger: %+v", events)
	}
	run(t, c, "import time; time.sleep(1)") // the first Timer's output goes before this one's idle
	c.Linger = 500 * time.Millisecond
	// One print, which the kernel may send in more than one stream
	// message ("late", then "\n", in one CI run).
	_, events := run(t, c, late("0.05"))
	var text strings.Builder
	for _, ev := range events {
		if ev.Kind != "stdout" {
			t.Errorf("with Linger, not stdout: %+v", ev)
		}
		text.WriteString(ev.Text)
	}
	if text.String() != "late\n" {
		t.Errorf("with Linger: %+v", events)
	}
}
