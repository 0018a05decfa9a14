package core

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// waitPool waits until every pool is full and returns the backend's
// sandboxes then.
func waitPool(t *testing.T, d *testDaemon) []string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		full := true
		for _, p := range d.m.pools() {
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
	t.Fatalf("the pool did not fill: %+v", d.m.pools())
	return nil
}

// runManager runs d's Manager (its timers and pools) until the test ends
// or the function it returns is called.
func runManager(t *testing.T, d *testDaemon) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.m.Run(ctx) // returns nil when ctx ends
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func TestWarmPool(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t, func(c *Config) {
		c.Pools = []PoolSpec{{Template: "host", Size: 2}}
		c.ReapInterval = 50 * time.Millisecond
	})
	stopManager := runManager(t, d)

	pooled := waitPool(t, d)
	if len(pooled) != 2 {
		t.Fatalf("backend has %v, want the 2 pool sandboxes", pooled)
	}
	if list, err := d.m.List(t.Context()); err != nil || len(list) != 0 {
		t.Fatalf("pool sandboxes are listed as users': %v, %v", list, err)
	}
	if p := d.m.pools(); len(p) != 1 || p[0].Template != "host" || p[0].Runtime != "fake" || p[0].Size != 2 {
		t.Errorf("Pools() = %+v", p)
	}

	// A create of the default shape takes one, env and all.
	sb := d.create(t, create.Options{Env: map[string]string{"FROM": "the create"}})
	if !slices.Contains(pooled, sb.ID) {
		t.Errorf("sandbox %s is not one of the pool's %v", sb.ID, pooled)
	}
	out, res, err := d.exec(t, sb.ID, execRequest{Command: `echo "$FROM"`})
	if err != nil || res.ExitCode != 0 || out != "the create\n" {
		t.Errorf("exec in the taken sandbox: %q, %+v, %v", out, res, err)
	}
	if got, err := d.db.GetSandbox(t.Context(), sb.ID); err != nil || got.Env["FROM"] != "the create" {
		t.Errorf("record of the taken sandbox: %+v, %v", got, err)
	}

	// The pool fills again; a create of another shape does not take one.
	refilled := waitPool(t, d)
	other := d.create(t, create.Options{MemoryMB: 256})
	if slices.Contains(refilled, other.ID) {
		t.Errorf("a create with 256 MB took pool sandbox %s", other.ID)
	}

	for _, id := range []string{sb.ID, other.ID} {
		if err := d.m.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	// Stopping the daemon destroys the pool.
	stopManager()
	d.stop(t)
	if left, err := d.backend.List(t.Context()); err != nil || len(left) != 0 {
		t.Errorf("sandboxes left after the daemon stopped: %v, %v", left, err)
	}
}

// commitTemplate makes a new version of template name in the store (the
// fake makes its sandboxes' roots itself: an empty one does) and returns
// its version.
func commitTemplate(t *testing.T, s *rootfs.Store, name string) string {
	t.Helper()
	b, err := s.Begin(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Abort() }()
	if err := os.MkdirAll(b.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := b.Commit(rootfs.Info{Source: rootfs.SourceDebian})
	if err != nil {
		t.Fatal(err)
	}
	return info.Version
}

// The core hears of a template's changes from the store, whoever made
// them: a new version replaces the pool's sandboxes of the one before,
// and the versions no sandbox uses go; a removed template's pool
// sandboxes go with it.
func TestWarmPoolFollowsTemplate(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	v1 := commitTemplate(t, state.templates, "tools")
	d := state.start(t, func(c *Config) {
		c.Pools = []PoolSpec{{Template: "tools", Size: 1}}
		c.ReapInterval = 50 * time.Millisecond
	})
	runManager(t, d)

	first := waitPool(t, d)
	// A sandbox of another shape is made, not taken: it keeps v1.
	user := d.create(t, create.Options{Template: "tools", MemoryMB: 256})

	v2 := commitTemplate(t, state.templates, "tools")
	if d.listed(t, first[0]) {
		t.Errorf("pool sandbox %s of the version before is still there", first[0])
	}
	second := waitPool(t, d)
	if slices.Contains(second, first[0]) || len(second) != 2 {
		t.Errorf("after a new version the backend has %v; want the user's sandbox and a new pool sandbox", second)
	}

	commitTemplate(t, state.templates, "tools")
	if _, err := state.templates.Version("tools", v2); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("version %s, which only the pool used, after the next one: %v, want pruned", v2, err)
	}
	if _, err := state.templates.Version("tools", v1); err != nil {
		t.Errorf("version %s, which sandbox %s uses: %v, want kept", v1, user.ID, err)
	}

	if err := d.m.Delete(t.Context(), user.ID); err != nil {
		t.Fatal(err)
	}
	if err := state.templates.Remove("tools"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ids, err := d.backend.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool's sandboxes of a removed template are still there: %v", ids)
		}
	}
}

// A pool of a template built after the daemon started fills when the build
// ends, not a retry period (30 s, longer than waitPool waits) later.
func TestWarmPoolFillsAfterBuild(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t, func(c *Config) {
		c.Pools = []PoolSpec{{Template: "later", Size: 1}}
		c.ReapInterval = 50 * time.Millisecond
	})
	runManager(t, d)

	// The fills fail while the template is not there.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d.m.pool.mu.Lock()
		_, failed := d.m.pool.failed[poolKey{"later", "fake"}]
		d.m.pool.mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool of a template not built did not try to fill")
		}
	}
	commitTemplate(t, state.templates, "later")
	if ids := waitPool(t, d); len(ids) != 1 {
		t.Errorf("backend has %v, want the pool's sandbox", ids)
	}
}

// A pool's sandbox keeps its container's watch when handed over: an end
// seen while nobody was told (between the take and the taker's watch) is
// told to the taker as soon as it watches.
func TestHandedOverWatch(t *testing.T) {
	t.Parallel()
	inst := &instance{stopWatch: func() {}}
	var pool []string
	if !inst.whenEnded(func(r string) { pool = append(pool, r) }) {
		t.Error("an instance with a watch says it has none")
	}
	inst.containerEnded("before the take")
	inst.whenEnded(nil) // taken
	inst.containerEnded("between the take and the taker's watch")
	told := make(chan string, 1)
	inst.whenEnded(func(r string) { told <- r })
	select {
	case r := <-told:
		if r != "between the take and the taker's watch" {
			t.Errorf("the taker was told %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the taker was not told of the end it missed")
	}
	if !slices.Equal(pool, []string{"before the take"}) {
		t.Errorf("the pool was told %q, want the end before the take only", pool)
	}
}
