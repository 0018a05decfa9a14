package e2e

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// TestPause freezes a sandbox with the CLI under each runtime: it shows
// paused, the next exec thaws it, and a paused sandbox can be removed.
func TestPause(t *testing.T) {
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if out, stderr, code := d.cli("", "pause", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch pause: %d %q %q", code, out, stderr)
		}
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil || got.State != client.StatePaused || got.StateReason != "paused by request" {
			t.Fatalf("a paused sandbox: %+v, %v", got, err)
		}
		if out, stderr, code := d.cli("", "exec", sb.ID, "--", "echo", "thawed"); code != 0 || out != "thawed\n" {
			t.Fatalf("exec in a paused sandbox: %d %q %q", code, out, stderr)
		}
		if got, _ := d.client.GetSandbox(t.Context(), sb.ID); got.State != client.StateRunning {
			t.Errorf("after the exec: %s, want running", got.State)
		}
		if _, err := d.client.PauseSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "unpause", sb.ID); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch unpause: %d %q %q", code, out, stderr)
		}
		if _, err := d.client.PauseSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "rm", sb.ID); code != 0 || !strings.Contains(out, sb.ID) {
			t.Fatalf("rm of a paused sandbox: %d %q %q", code, out, stderr)
		}
	})
	if _, stderr, code := d.cli("", "pause", "nosuchsandbox"); code != 1 || !strings.Contains(stderr, "not found") {
		t.Errorf("pause of an unknown sandbox: %d %q", code, stderr)
	}
}
