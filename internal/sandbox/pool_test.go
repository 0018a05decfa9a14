package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"
)

// waitPool waits until every pool is full and returns the backend's
// sandboxes then.
func waitPool(t *testing.T, d *testDaemon) []string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		full := true
		for _, p := range d.m.Pools() {
			full = full && p.Ready == p.Size
		}
		if full {
			ids, err := d.backend.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
	}
	t.Fatalf("the pool did not fill: %+v", d.m.Pools())
	return nil
}

func TestWarmPool(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t, func(c *Config) {
		c.Pools = []PoolSpec{{Template: "host", Size: 2}}
		c.ReapInterval = 50 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.m.Run(ctx) // returns nil when ctx ends
	}()
	defer func() { cancel(); <-done }()

	pooled := waitPool(t, d)
	if len(pooled) != 2 {
		t.Fatalf("backend has %v, want the 2 pool sandboxes", pooled)
	}
	if list, err := d.m.List(t.Context()); err != nil || len(list) != 0 {
		t.Fatalf("pool sandboxes are listed as users': %v, %v", list, err)
	}
	if p := d.m.Pools(); len(p) != 1 || p[0].Template != "host" || p[0].Runtime != "fake" || p[0].Size != 2 {
		t.Errorf("Pools() = %+v", p)
	}

	// A create of the default shape takes one, env and all.
	sb := d.create(t, CreateOptions{Env: map[string]string{"FROM": "the create"}})
	if !slices.Contains(pooled, sb.ID) {
		t.Errorf("sandbox %s is not one of the pool's %v", sb.ID, pooled)
	}
	out, res, err := d.exec(t, sb.ID, ExecRequest{Command: `echo "$FROM"`})
	if err != nil || res.ExitCode != 0 || out != "the create\n" {
		t.Errorf("exec in the taken sandbox: %q, %+v, %v", out, res, err)
	}
	if got, err := d.db.GetSandbox(t.Context(), sb.ID); err != nil || got.Env["FROM"] != "the create" {
		t.Errorf("record of the taken sandbox: %+v, %v", got, err)
	}

	// The pool fills again; a create of another shape does not take one.
	refilled := waitPool(t, d)
	other := d.create(t, CreateOptions{MemoryMB: 256})
	if slices.Contains(refilled, other.ID) {
		t.Errorf("a create with 256 MB took pool sandbox %s", other.ID)
	}

	for _, id := range []string{sb.ID, other.ID} {
		if err := d.m.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	// Stopping the daemon destroys the pool.
	cancel()
	<-done
	d.stop(t)
	if left, err := d.backend.List(t.Context()); err != nil || len(left) != 0 {
		t.Errorf("sandboxes left after the daemon stopped: %v, %v", left, err)
	}
}
