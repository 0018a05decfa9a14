package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A background process started with stdin reads what is sent to it, from
// the API and the CLI, and exits when its stdin is closed; one started
// without is refused input, under both runtimes.
func TestProcessStdin(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if _, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "echoer", Cmd: []string{"cat"}, Stdin: true}); err != nil {
			t.Fatal(err)
		}
		logs := func() string {
			var out strings.Builder
			if err := d.client.ProcessLogs(ctx, sb.ID, "echoer", false, func(ev client.ExecEvent) error {
				out.Write(ev.Data)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return out.String()
		}
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not within 20 s (logs %q)", what, logs())
				}
			}
		}
		if err := d.client.SendProcessInput(ctx, sb.ID, "echoer", []byte("hello\n"), false); err != nil {
			t.Fatal(err)
		}
		waitFor("the first input echoed", func() bool { return strings.Contains(logs(), "hello\n") })
		if _, stderr, code := d.cli("from the cli\n", "process", "stdin", sb.ID, "echoer", "--close"); code != 0 {
			t.Fatalf("hutch process stdin: %d %s", code, stderr)
		}
		waitFor("the CLI's input echoed and the process ended", func() bool {
			procs, err := d.client.ListProcesses(ctx, sb.ID)
			return err == nil && len(procs) == 1 && procs[0].Status == client.ProcessExited && strings.Contains(logs(), "from the cli\n")
		})
		// Without stdin, input is refused; to a process that ended, too.
		if _, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "sleeper", Cmd: []string{"sleep", "300"}}); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name string
			code string
		}{{"sleeper", "failed_precondition"}, {"echoer", "not_found"}} {
			err := d.client.SendProcessInput(ctx, sb.ID, tt.name, []byte("x"), false)
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != tt.code || ce.StatusCode == http.StatusInternalServerError {
				t.Errorf("input to %s: %v; want %s", tt.name, err, tt.code)
			}
		}
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}
