package exec_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
)

// logsOf returns a background process's kept stdout.
func logsOf(t *testing.T, s *exec.Service, id, name string) string {
	t.Helper()
	var out strings.Builder
	if err := s.ProcessLogs(t.Context(), id, name, false, stdoutOf(&out)); err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return out.String()
}

// processes lists a sandbox's background processes by name.
func processes(t *testing.T, s *exec.Service, id string) map[string]exec.ProcessInfo {
	t.Helper()
	procs, err := s.ListProcesses(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]exec.ProcessInfo{}
	for _, p := range procs {
		out[p.Name] = p
	}
	return out
}

// A background process outlives its request with its env and the
// sandbox's, is listed (without waking its sandbox) as running, frozen or
// suspended, is started again by a resume, and can be signalled,
// restarted and deleted. (How it keeps its sandbox awake is the core's,
// tested there.)
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{Env: map[string]string{"FROM_SANDBOX": "sb"}})
	workspace := c.Workspace(sb.ID)

	web, err := s.StartProcess(ctx, sb.ID, exec.ProcessRequest{
		Name: "web", Command: `echo "started $TOKEN $FROM_SANDBOX"; exec sleep 600`, Cwd: workspace,
		Env: map[string]string{"TOKEN": "s3cret"}, Port: 8000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if web.Status != exec.ProcessRunning || web.Pid == 0 || !slices.Equal(web.EnvNames, []string{"TOKEN"}) || web.Port != 8000 {
		t.Errorf("started: %+v", web)
	}
	waitFor(t, "the process's first output", func() bool { return logsOf(t, s, sb.ID, "web") == "started s3cret sb\n" })
	if _, err := s.StartProcess(ctx, sb.ID, exec.ProcessRequest{Name: "web", Command: "true", Cwd: workspace}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a second start of a running name: %v, want conflict", err)
	}

	// Listed while its sandbox is paused or suspended, without waking it.
	if _, err := c.M.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if p := processes(t, s, sb.ID)["web"]; p.Status != exec.ProcessRunning || p.Pid != 0 {
		t.Errorf("while paused: %+v, want running (frozen), no pid", p)
	}
	if got, _ := c.M.Get(ctx, sb.ID); got.State != store.Paused {
		t.Errorf("listing the processes of a paused sandbox made it %s", got.State)
	}
	if _, err := c.M.Halt(ctx, sb.ID, core.Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	if p := processes(t, s, sb.ID)["web"]; p.Status != exec.ProcessSuspended {
		t.Errorf("while suspended: %+v", p)
	}
	if got, _ := c.M.Get(ctx, sb.ID); got.State != store.Suspended {
		t.Errorf("listing the processes of a suspended sandbox made it %s", got.State)
	}

	// The resume starts it again with its env.
	if _, err := c.M.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	again := processes(t, s, sb.ID)["web"]
	if again.Status != exec.ProcessRunning || again.Pid == 0 {
		t.Errorf("after the resume: %+v", again)
	}
	waitFor(t, "the restarted process's output", func() bool { return logsOf(t, s, sb.ID, "web") == "started s3cret sb\n" })

	// Signalled, restarted, deleted.
	if err := s.SignalProcess(ctx, sb.ID, "web", "TERM"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process to exit", func() bool { return processes(t, s, sb.ID)["web"].Status == exec.ProcessExited })
	if err := s.SignalProcess(ctx, sb.ID, "web", "TERM"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("signal to an exited process: %v, want failed precondition", err)
	}
	restarted, err := s.RestartProcess(ctx, sb.ID, "web")
	if err != nil || restarted.Status != exec.ProcessRunning {
		t.Fatalf("restart of an exited process: %+v, %v", restarted, err)
	}
	if err := s.DeleteProcess(ctx, sb.ID, "web"); err != nil {
		t.Fatal(err)
	}
	if procs := processes(t, s, sb.ID); len(procs) != 0 {
		t.Errorf("after delete: %+v", procs)
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

func TestProcessErrors(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{})
	tests := []struct {
		name string
		req  exec.ProcessRequest
		want error
	}{
		{"no command", exec.ProcessRequest{Name: "a"}, errdefs.ErrInvalidArgument},
		{"bad name", exec.ProcessRequest{Name: "../x", Command: "true"}, errdefs.ErrInvalidArgument},
		{"bad port", exec.ProcessRequest{Name: "a", Command: "true", Port: 70000}, errdefs.ErrInvalidArgument},
		{"bad env", exec.ProcessRequest{Name: "a", Command: "true", Env: map[string]string{"A=B": "c"}}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		if _, err := s.StartProcess(ctx, sb.ID, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := s.StartProcess(ctx, "nope", exec.ProcessRequest{Command: "true"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("start in a missing sandbox: %v", err)
	}
	if err := s.SignalProcess(ctx, sb.ID, "nope", "TERM"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("signal to a missing process: %v", err)
	}
	if err := s.SignalProcess(ctx, sb.ID, "nope", "STOP"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an unknown signal: %v", err)
	}
	p, err := s.StartProcess(ctx, sb.ID, exec.ProcessRequest{Cmd: []string{"/bin/sleep", "600"}, Cwd: c.Workspace(sb.ID)})
	if err != nil || !strings.HasPrefix(p.Name, "sleep-") {
		t.Errorf("a process without a name: %+v, %v", p, err)
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}
