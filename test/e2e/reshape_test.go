package e2e

import (
	"testing"

	"github.com/hutchdev/hutch/client"
)

// TestUpdateSuspended changes a suspended sandbox's env and limits, under
// each runtime: the next command (which resumes it) sees the new env, and
// its cgroup the new memory limit.
func TestUpdateSuspended(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, MemoryMB: 256, Env: map[string]string{"STAGE": "one"}})
		if _, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{MemoryMB: 1024}); !client.IsFailedPrecondition(err) {
			t.Errorf("new limits of a running sandbox: %v, want failed precondition", err)
		}
		if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		got, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{MemoryMB: 1024, Env: map[string]string{"STAGE": "two"}})
		if err != nil || got.MemoryMB != 1024 || got.State != client.StateSuspended {
			t.Fatalf("update of the suspended sandbox: %+v, %v", got, err)
		}
		if res := d.exec(sb.ID, "echo $STAGE"); res.Stdout != "two\n" {
			t.Errorf("the env after the resume: %+v", res)
		}
		st, err := d.client.Stats(ctx, sb.ID)
		if err != nil || st.MemoryLimitBytes != 1024<<20 {
			t.Errorf("the memory limit after the resume: %+v, %v; want 1 GiB", st, err)
		}
	})
}
