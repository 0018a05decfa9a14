package e2e

import (
	"testing"

	"github.com/hutchdev/hutch/client"
)

// TestUpdateLimits changes a sandbox's limits under each runtime: running,
// its CPU in place (and under runc its memory, not below what it uses);
// suspended (by hutch update), its env and memory for its resume, which
// the next command makes.
func TestUpdateLimits(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, MemoryMB: 256, CPUs: 1, Env: map[string]string{"STAGE": "one"}})
		limits := func() *client.SandboxStats {
			t.Helper()
			st, err := d.client.Stats(ctx, sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		// Running: the CPU quota in place under both.
		if _, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{CPUs: 0.5}); err != nil {
			t.Fatalf("half a CPU for the running sandbox: %v", err)
		}
		if st := limits(); st.CPUs != 0.5 {
			t.Errorf("its CPU limit after the change: %v", st.CPUs)
		}
		_, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{MemoryMB: 512})
		switch {
		case runtime == "runc" && err != nil:
			t.Fatalf("more memory for the running runc sandbox: %v", err)
		case runtime == "runc" && limits().MemoryLimitBytes != 512<<20:
			t.Errorf("its memory limit after the change: %d", limits().MemoryLimitBytes)
		case runtime == "gvisor" && !client.IsFailedPrecondition(err):
			t.Errorf("more memory for the running gVisor sandbox: %v, want failed precondition (its kernel sizes itself at its start)", err)
		}
		if runtime == "runc" {
			if _, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{MemoryMB: 64}); err != nil {
				t.Fatalf("a memory limit above its use: %v", err)
			}
		}

		// Suspended: for its next start.
		if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := d.cli("", "update", sb.ID, "--memory", "1024", "-e", "STAGE=two"); code != 0 || out != sb.ID+"\n" {
			t.Fatalf("hutch update of the suspended sandbox: %d %q %q", code, out, stderr)
		}
		got, err := d.client.GetSandbox(ctx, sb.ID)
		if err != nil || got.MemoryMB != 1024 || got.CPUs != 0.5 || got.State != client.StateSuspended {
			t.Fatalf("the suspended sandbox after hutch update: %+v, %v", got, err)
		}
		if res := d.exec(sb.ID, "echo $STAGE"); res.Stdout != "two\n" {
			t.Errorf("the env after the resume: %+v", res)
		}
		if st := limits(); st.MemoryLimitBytes != 1024<<20 {
			t.Errorf("the memory limit after the resume: %+v; want 1 GiB", st)
		}
	})
}
