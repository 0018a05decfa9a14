package exec_test

import (
	"errors"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
)

// Code runs as a command does, its exit code its own; a language the
// sandbox lacks says which templates have it, one Hutch does not know
// says which it does.
func TestRunCode(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{})
	tests := []struct {
		name     string
		req      exec.CodeRequest
		stdout   string
		exitCode int
	}{
		{"sh", exec.CodeRequest{Language: "sh", Code: "echo hi"}, "hi\n", 0},
		{"an alias, in capitals", exec.CodeRequest{Language: "BASH", Code: `echo "${BASH_VERSION:+bash}"; exit 3`}, "bash\n", 3},
		{"its env", exec.CodeRequest{Language: "sh", Code: `echo "$GREETING"`, Env: map[string]string{"GREETING": "hello"}}, "hello\n", 0},
		{"output like the marker", exec.CodeRequest{Language: "sh", Code: "echo 'hutch: missing runtime' >&2; exit 127"}, "", 127},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Cwd = c.Workspace(sb.ID)
			var out strings.Builder
			res, err := s.RunCode(ctx, sb.ID, tt.req, stdoutOf(&out))
			if err != nil || out.String() != tt.stdout || res.ExitCode != tt.exitCode {
				t.Errorf("RunCode: %q, %+v, %v; want %q and exit %d", out.String(), res, err, tt.stdout, tt.exitCode)
			}
		})
	}

	var out strings.Builder
	if _, err := s.RunCode(ctx, sb.ID, exec.CodeRequest{Language: "cobol", Code: "x"}, stdoutOf(&out)); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "python") {
		t.Errorf("an unknown language: %v, want invalid argument naming the languages", err)
	}
	// The fake's sandboxes run the host's programs.
	for _, lang := range []struct{ name, program string }{{"ruby", "ruby"}, {"bun", "bun"}, {"deno", "deno"}} {
		if _, err := osexec.LookPath(lang.program); err == nil {
			continue
		}
		_, err := s.RunCode(ctx, sb.ID, exec.CodeRequest{Language: lang.name, Code: "x", Cwd: c.Workspace(sb.ID)}, stdoutOf(&out))
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), lang.program) {
			t.Errorf("%s code where %s is missing: %v, want failed precondition naming it", lang.name, lang.program, err)
		}
		break
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}
