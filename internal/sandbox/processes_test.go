package sandbox

import (
	"archive/tar"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/lifecycle"
	"github.com/hutchdev/hutch/internal/template"
)

// logsOf returns a background process's kept stdout.
func (d *testDaemon) logsOf(t *testing.T, id, name string) string {
	t.Helper()
	var out strings.Builder
	err := d.m.ProcessLogs(t.Context(), id, name, false, func(s Stream, data []byte) error {
		if s == Stdout {
			out.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return out.String()
}

func (d *testDaemon) processes(t *testing.T, id string) map[string]ProcessInfo {
	t.Helper()
	procs, err := d.m.ListProcesses(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ProcessInfo{}
	for _, p := range procs {
		out[p.Name] = p
	}
	return out
}

// A background process outlives its request, keeps its sandbox awake past
// the idle timeout, is started again by a resume, and can be signalled,
// restarted and deleted.
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	d := newDaemonState(t).start(t, withClock(clock))
	ctx := t.Context()
	sb := d.create(t, CreateOptions{IdleTimeout: time.Second, Env: map[string]string{"FROM_SANDBOX": "sb"}})
	workspace := d.backend.Root(sb.ID) + template.Workspace

	web, err := d.m.StartProcess(ctx, sb.ID, ProcessRequest{
		Name: "web", Command: `echo "started $TOKEN $FROM_SANDBOX"; exec sleep 600`, Cwd: workspace,
		Env: map[string]string{"TOKEN": "s3cret"}, Port: 8000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if web.Status != ProcessRunning || web.Pid == 0 || !slices.Equal(web.EnvNames, []string{"TOKEN"}) || web.Port != 8000 {
		t.Errorf("started: %+v", web)
	}
	waitFor(t, "the process's first output", func() bool { return d.logsOf(t, sb.ID, "web") == "started s3cret sb\n" })
	if _, err := d.m.StartProcess(ctx, sb.ID, ProcessRequest{Name: "web", Command: "true", Cwd: workspace}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a second start of a running name: %v, want conflict", err)
	}

	// Past its idle timeout, the sandbox stays awake while the process runs.
	d.tickAfter(t, clock, 2*time.Second)
	if got, _ := d.m.Get(ctx, sb.ID); got.State != lifecycle.Running {
		t.Fatalf("a sandbox running a background process is %s (%s)", got.State, got.StateReason)
	}
	act, err := d.m.Activity(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !act.Busy || !slices.ContainsFunc(act.Reasons, func(r string) bool { return strings.Contains(r, `background process "web"`) }) || !act.ActionAt.IsZero() {
		t.Errorf("activity of a busy sandbox: %+v", act)
	}

	// A suspend ends it; the resume starts it again with its env.
	if _, err := d.m.Suspend(ctx, sb.ID, "suspended by request"); err != nil {
		t.Fatal(err)
	}
	if p := d.processes(t, sb.ID)["web"]; p.Status != ProcessSuspended {
		t.Errorf("while suspended: %+v", p)
	}
	if _, err := d.m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	again := d.processes(t, sb.ID)["web"]
	if again.Status != ProcessRunning || again.Pid == 0 {
		t.Errorf("after the resume: %+v", again)
	}
	waitFor(t, "the restarted process's output", func() bool { return d.logsOf(t, sb.ID, "web") == "started s3cret sb\n" })

	// Ended by a signal, it no longer keeps the sandbox awake.
	if err := d.m.SignalProcess(ctx, sb.ID, "web", "TERM"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process to exit", func() bool { return d.processes(t, sb.ID)["web"].Status == ProcessExited })
	if err := d.m.SignalProcess(ctx, sb.ID, "web", "TERM"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("signal to an exited process: %v, want failed precondition", err)
	}
	restarted, err := d.m.RestartProcess(ctx, sb.ID, "web")
	if err != nil || restarted.Status != ProcessRunning {
		t.Fatalf("restart of an exited process: %+v, %v", restarted, err)
	}
	if err := d.m.DeleteProcess(ctx, sb.ID, "web"); err != nil {
		t.Fatal(err)
	}
	if procs := d.processes(t, sb.ID); len(procs) != 0 {
		t.Errorf("after delete: %+v", procs)
	}
	d.tickAfter(t, clock, 2*time.Second)
	if got, _ := d.m.Get(ctx, sb.ID); got.State != lifecycle.Suspended {
		t.Errorf("idle with no process left: %s, want suspended", got.State)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

func TestProcessErrors(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, CreateOptions{})
	tests := []struct {
		name string
		req  ProcessRequest
		want error
	}{
		{"no command", ProcessRequest{Name: "a"}, errdefs.ErrInvalidArgument},
		{"bad name", ProcessRequest{Name: "../x", Command: "true"}, errdefs.ErrInvalidArgument},
		{"bad port", ProcessRequest{Name: "a", Command: "true", Port: 70000}, errdefs.ErrInvalidArgument},
		{"bad env", ProcessRequest{Name: "a", Command: "true", Env: map[string]string{"A=B": "c"}}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		if _, err := d.m.StartProcess(ctx, sb.ID, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := d.m.StartProcess(ctx, "nope", ProcessRequest{Command: "true"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("start in a missing sandbox: %v", err)
	}
	if err := d.m.SignalProcess(ctx, sb.ID, "nope", "TERM"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("signal to a missing process: %v", err)
	}
	if err := d.m.SignalProcess(ctx, sb.ID, "nope", "STOP"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an unknown signal: %v", err)
	}
	p, err := d.m.StartProcess(ctx, sb.ID, ProcessRequest{Cmd: []string{"/bin/sleep", "600"}, Cwd: d.backend.Root(sb.ID) + template.Workspace})
	if err != nil || !strings.HasPrefix(p.Name, "sleep-") {
		t.Errorf("a process without a name: %+v, %v", p, err)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Files given at create are in the workspace, the sandbox user's, before
// the first command; paths out of the workspace are refused.
func TestCreateWithFiles(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, CreateOptions{Files: map[string]string{
		"notes.txt":       "hello\n",
		"src/app/main.py": "print(1)\n",
		template.Workspace + "/data/absolute.json": "{}",
	}})
	root := d.backend.Root(sb.ID) + template.Workspace
	out, _, err := d.exec(t, sb.ID, ExecRequest{Command: `cat notes.txt src/app/main.py data/absolute.json; echo; stat -c '%u %a %n' src src/app src/app/main.py`})
	want := "hello\nprint(1)\n{}\n1000 755 src\n1000 755 src/app\n1000 644 src/app/main.py\n"
	if err != nil || out != want {
		t.Errorf("in the workspace %s: %q, %v; want %q", root, out, err, want)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// A tar, unpacked before the map is laid over it.
	sb = d.create(t, CreateOptions{Files: map[string]string{"notes.txt": "from the map\n"}, FilesTar: tarOf(t, true,
		tar.Header{Name: "bin/run.sh", Typeflag: tar.TypeReg, Mode: 0o755, Linkname: "echo from the tar\n"},
		tar.Header{Name: "bin/tool", Typeflag: tar.TypeSymlink, Linkname: "run.sh"},
	)})
	out, _, err = d.exec(t, sb.ID, ExecRequest{Command: `cat notes.txt; sh bin/tool; stat -c '%u %a %F' bin/run.sh bin/tool`})
	want = "from the map\nfrom the tar\n1000 755 regular file\n1000 777 symbolic link\n"
	if err != nil || out != want {
		t.Errorf("from the tar: %q, %v; want %q", out, err, want)
	}
	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{
		{"../escape": "x"},
		{"/etc/passwd": "x"},
		{"": "x"},
		{"a": "file", "a/b": "under a file"},
	} {
		if _, err := d.m.Create(ctx, CreateOptions{Files: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("files %v: %v, want invalid argument", bad, err)
		}
	}
}
