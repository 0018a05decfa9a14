package exec_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/store"

	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/runtime/fake"
)

// The service over a core on SQLite and the fake backend, whose sandboxes
// are real agents without isolation (see coretest).

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	// The core owns goroutines (watches, agent connections): a closed one
	// leaves none.
	goleak.VerifyTestMain(m)
}

// start starts a core and the service over it.
func start(t *testing.T) (*coretest.Core, *exec.Service) {
	t.Helper()
	c := coretest.Start(t)
	return c, exec.New(c.M, c.Processes, c.DB, nil)
}

// stdoutOf is an exec.Output that keeps stdout in b.
func stdoutOf(b *strings.Builder) exec.Output {
	return func(s exec.Stream, data []byte) error {
		if s == exec.Stdout {
			b.Write(data)
		}
		return nil
	}
}

// A command runs with the sandbox's env under its own, its stdin, and in
// its working directory, and ends with its own exit code.
func TestExec(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{Env: map[string]string{"GREETING": "hello", "WHO": "sandbox"}})
	stdin := "piped in"
	var out strings.Builder
	res, err := s.Exec(ctx, sb.ID, exec.Request{
		Command: `echo "$GREETING $WHO from $(id -u) in $(basename "$PWD")"; cat; exit 3`,
		Cwd:     c.Workspace(sb.ID), Env: map[string]string{"WHO": "command"}, Stdin: &stdin,
	}, stdoutOf(&out))
	if want := "hello command from 1000 in workspace\npiped in"; err != nil || out.String() != want || res.ExitCode != 3 {
		t.Errorf("exec: %q, %+v, %v; want %q and exit 3", out.String(), res, err, want)
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, sb.ID, exec.Request{Command: "true"}, stdoutOf(&out)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("exec after delete: %v, want not found", err)
	}
}

// A command the sandbox would refuse is refused before the sandbox is
// woken for it.
func TestExecRefusesBeforeWaking(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{})
	if _, err := c.M.Halt(ctx, sb.ID, core.Halt{Reason: "suspended by request"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  exec.Request
	}{
		{"neither cmd nor command", exec.Request{}},
		{"both cmd and command", exec.Request{Cmd: []string{"true"}, Command: "true"}},
		{"an empty program", exec.Request{Cmd: []string{""}}},
		{"a timeout past the most", exec.Request{Command: "true", Timeout: exec.MaxTimeout + time.Second}},
		{"a negative timeout", exec.Request{Command: "true", Timeout: -time.Second}},
		{"a bad env name", exec.Request{Command: "true", Env: map[string]string{"A=B": "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if _, err := s.Exec(ctx, sb.ID, tt.req, stdoutOf(&out)); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("exec: %v, want invalid argument", err)
			}
		})
	}
	if got, err := c.M.Get(ctx, sb.ID); err != nil || got.State != store.Suspended {
		t.Errorf("after the refused commands: %+v, %v; want still suspended", got, err)
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
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
