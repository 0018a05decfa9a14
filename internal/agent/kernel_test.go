package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

// codeRun is what one RunCode gave.
type codeRun struct {
	stdout, stderr string
	results        []*agentclient.CodeResult
	err            *agentclient.CodeError
	end            agentclient.CodeEnd
}

func (r codeRun) main() string {
	for _, res := range r.results {
		if res.Main {
			return strings.Trim(string(res.Data["text/plain"]), `"`)
		}
	}
	return ""
}

func runIn(t *testing.T, a *testAgent, id, code string, timeout time.Duration) codeRun {
	t.Helper()
	var r codeRun
	end, err := a.client.RunCode(t.Context(), id, code, timeout, true, func(ev agentclient.CodeEvent) error {
		r.stdout += ev.Stdout
		r.stderr += ev.Stderr
		if ev.Result != nil {
			r.results = append(r.results, ev.Result)
		}
		if ev.Error != nil {
			r.err = ev.Error
		}
		return nil
	})
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	r.end = end
	return r
}

// Not parallel, as the other tests that run commands: two in-process
// agents would reap each other's children.
func TestBashContext(t *testing.T) {
	a := startAgent(t)
	ctx := t.Context()
	c, err := a.client.CreateContext(ctx, agentclient.NewContext{Language: "sh"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Language != "bash" || c.Cwd != a.home || c.Pid == 0 {
		t.Errorf("context: %+v", c)
	}
	if r := runIn(t, a, c.ID, "x=41; mkdir -p sub && cd sub; echo out; echo err >&2", 0); r.stdout != "out\n" || r.stderr != "err\n" || r.err != nil {
		t.Errorf("first cell: %+v", r)
	}
	r := runIn(t, a, c.ID, "echo $((x + 1)) $PWD; printf 'no newline \\036 here'; echo hi > f.txt", 0)
	if want := "42 " + filepath.Join(a.home, "sub") + "\nno newline \036 here"; r.stdout != want {
		t.Errorf("state kept: got %q, want %q", r.stdout, want)
	}
	if want := []string{filepath.Join(a.home, "sub", "f.txt")}; !slices.Equal(r.end.Files, want) {
		t.Errorf("files written: %v, want %v", r.end.Files, want)
	}
	if r := runIn(t, a, c.ID, "false", 0); r.err == nil || r.err.Name != "ExitStatus" || r.err.Value != "1" {
		t.Errorf("a failing cell: %+v", r.err)
	}
	// A loop in the shell itself and a foreground command are both
	// interrupted at the timeout; the state stays.
	for _, loop := range []string{"while :; do :; done", "sleep 100"} {
		r := runIn(t, a, c.ID, loop, 300*time.Millisecond)
		if !r.end.TimedOut || r.end.Restarted {
			t.Errorf("%s at its timeout: %+v", loop, r.end)
		}
	}
	if r := runIn(t, a, c.ID, "echo $x", 0); r.stdout != "41\n" {
		t.Errorf("after the interrupts: %+v", r)
	}
	// exit ends the shell: a new one takes its place.
	if r := runIn(t, a, c.ID, "exit 3", 0); !r.end.Restarted || r.err == nil || r.err.Name != "KernelDied" {
		t.Errorf("exit: %+v", r)
	}
	if r := runIn(t, a, c.ID, "echo ${x:-gone}", 0); r.end.Restarted || r.stdout != "gone\n" {
		t.Errorf("after exit: %+v", r)
	}
	other, err := a.client.CreateContext(ctx, agentclient.NewContext{Language: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := a.client.Contexts(ctx); err != nil || len(list) != 2 {
		t.Errorf("contexts: %v, %v", list, err)
	}
	if err := a.client.DeleteContext(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.RunCode(ctx, other.ID, "true", 0, false, func(agentclient.CodeEvent) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("run in a deleted context: %v", err)
	}
	if _, err := a.client.CreateContext(ctx, agentclient.NewContext{Language: "cobol"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an unknown language: %v", err)
	}
}

func TestPythonContext(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run(); err != nil {
		t.Skip("needs Debian's python3-ipykernel on the host (./setup --deps installs it)")
	}
	a := startAgent(t)
	ctx := t.Context()
	c, err := a.client.CreateContext(ctx, agentclient.NewContext{Language: "python", Env: map[string]string{"PATH": "/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, a, c.ID, "x = 41", 0)
	if r := runIn(t, a, c.ID, "x + 1", 0); r.main() != "42" || r.end.ExecutionCount != 2 {
		t.Errorf("x + 1: %+v", r)
	}
	if r := runIn(t, a, c.ID, "1/0", 0); r.err == nil || r.err.Name != "ZeroDivisionError" || len(r.err.Traceback) == 0 {
		t.Errorf("1/0: %+v", r.err)
	}
	r := runIn(t, a, c.ID, "while True: pass", 500*time.Millisecond)
	if !r.end.TimedOut || r.end.Restarted || r.err == nil || r.err.Name != "KeyboardInterrupt" {
		t.Errorf("an endless loop at its timeout: %+v %+v", r.end, r.err)
	}
	if r := runIn(t, a, c.ID, "x", 0); r.main() != "41" {
		t.Errorf("x after the interrupt: %+v", r)
	}
	if r := runIn(t, a, c.ID, "open('out.csv', 'w').write('a,b\\n')", 0); len(r.end.Files) != 1 || r.end.Files[0] != filepath.Join(a.home, "out.csv") {
		t.Errorf("files written: %v", r.end.Files)
	}
	// A kernel that dies under the code: an error, and a fresh kernel.
	r = runIn(t, a, c.ID, "import os; os._exit(1)", 0)
	if r.err == nil || r.err.Name != "KernelDied" || !r.end.Restarted {
		t.Errorf("os._exit: %+v %+v", r.err, r.end)
	}
	if r := runIn(t, a, c.ID, "'x' in globals()", 0); r.main() != "False" {
		t.Errorf("after the restart: %+v", r)
	}
	pid := c.Pid
	if err := a.client.DeleteContext(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(int(pid)))); err == nil {
		waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for waitCtx.Err() == nil {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(int(pid)))); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if waitCtx.Err() != nil {
			t.Errorf("kernel %d still runs after its context was deleted", pid)
		}
	}
}
