package e2e

import (
	"testing"

	"github.com/hutchdev/hutch/client"
)

// A fork bomb fills the sandbox's process limit and no more: the sandbox
// still answers, and so do its neighbour and the daemon. Under gVisor the
// limit is RLIMIT_NPROC inside gVisor's kernel, so that the bomb cannot
// starve gVisor of host threads and take the sandbox down.
func TestForkBombIsContained(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		bomb := d.create(client.CreateSandboxRequest{Runtime: runtime, Pids: 128})
		neighbour := d.create(client.CreateSandboxRequest{Runtime: runtime})

		res, err := d.client.Exec(t.Context(), bomb.ID, client.ExecRequest{
			Command: "f() { f | f & }; f; sleep 3", TimeoutS: 10,
		})
		if err != nil {
			t.Fatalf("fork bomb: %v", err)
		}
		t.Logf("fork bomb ended: exit %d, killed_by %q", res.ExitCode, res.KilledBy)
		if got := d.exec(bomb.ID, "echo alive"); got.Stdout != "alive\n" {
			t.Fatalf("the bombed sandbox after the bomb: %+v", got)
		}
		if got := d.exec(neighbour.ID, "echo fine"); got.Stdout != "fine\n" {
			t.Fatalf("the neighbour: %+v", got)
		}
		if _, err := d.client.Health(t.Context()); err != nil {
			t.Fatalf("the daemon: %v", err)
		}
	})
}
