package quota_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/store"
	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/testclock"
)

// A create past each of a workspace's quotas is refused, saying which
// quota and its figures, and leaves nothing; other workspaces are not
// bound by it, and what a quota does not count (a suspended sandbox's
// CPUs) does not count.
func TestQuotas(t *testing.T) {
	t.Parallel()
	c := testclock.New()
	d := start(t, c)
	ctx := t.Context()
	tests := []struct {
		name   string
		quota  store.Quota
		first  create.Options // fits
		second create.Options // does not
		want   string         // in the refusal
	}{
		{"running sandboxes", store.Quota{Sandboxes: 1}, create.Options{}, create.Options{}, "running sandboxes: 1 of 1 run"},
		{"memory", store.Quota{MemoryMB: 1000}, create.Options{MemoryMB: 600}, create.Options{MemoryMB: 500}, "memory: 600 MiB of 1000 MiB in use, and this sandbox asks for 500 MiB"},
		{"cpus", store.Quota{CPUs: 1.5}, create.Options{CPUs: 1}, create.Options{CPUs: 1}, "CPUs: 1 of 1.5 in use, and this sandbox asks for 1"},
		{"disk", store.Quota{DiskMB: 3000}, create.Options{DiskMB: 2048}, create.Options{DiskMB: 2048}, "disk: 2048 MiB of 3000 MiB"},
	}
	for i, tt := range tests {
		ws := "quota-" + string(rune('a'+i))
		if err := d.k.SetQuota(ctx, ws, tt.quota); err != nil {
			t.Fatal(err)
		}
		tt.first.Workspace, tt.second.Workspace = ws, ws
		first := d.Create(t, tt.first)
		before, _ := d.Backend.List(ctx)
		_, _, err := d.M.Create(ctx, tt.second)
		if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), ws) {
			t.Errorf("%s: the create past the quota: %v; want resource exhausted saying %q", tt.name, err, tt.want)
		}
		after, _ := d.Backend.List(ctx)
		if len(after) != len(before) {
			t.Errorf("%s: the refused create left a sandbox: %v, was %v", tt.name, after, before)
		}
		if u, err := d.k.Usage(ctx, ws); err != nil || u.Sandboxes != 1 {
			t.Errorf("%s: usage after: %+v, %v", tt.name, u, err)
		}
		other := tt.second
		other.Workspace = "unbound"
		sb := d.Create(t, other) // another workspace's quota is not this one's
		// Torn down before the next round's count of the backend's
		// sandboxes (a Delete answers before its teardown ends).
		for _, id := range []string{first.ID, sb.ID} {
			if err := deleteAndWait(ctx, d.M, id); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A suspended sandbox runs no more: its place is free, its disk not.
	if err := d.k.SetQuota(ctx, "suspending", store.Quota{Sandboxes: 1, DiskMB: 4096}); err != nil {
		t.Fatal(err)
	}
	sb := d.Create(t, create.Options{Workspace: "suspending"})
	if _, err := d.M.Halt(ctx, sb.ID, core.Halt{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	second := d.Create(t, create.Options{Workspace: "suspending"})
	if _, _, err := d.M.Create(ctx, create.Options{Workspace: "suspending", Template: "host"}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a third create: %v; want resource exhausted", err)
	}
	// Its place taken, the suspended one does not run again until one
	// stops; then it does.
	if _, err := d.M.Resume(ctx, sb.ID); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "running sandboxes") {
		t.Errorf("a resume past the quota: %v; want resource exhausted", err)
	}
	if got, err := d.M.Get(ctx, sb.ID); err != nil || got.State != store.Suspended {
		t.Errorf("the refused resume's sandbox: %+v, %v; want it suspended still", got, err)
	}
	if _, err := d.M.Halt(ctx, second.ID, core.Halt{Stop: true, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.M.Resume(ctx, sb.ID); err != nil || got.State != store.Running {
		t.Errorf("a resume with room: %+v, %v", got, err)
	}
	for _, id := range []string{sb.ID, second.ID} {
		if err := d.M.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// Sandbox time counts towards a day's sandbox-hours while sandboxes run;
// past the quota a create is refused until the next UTC day.
func TestQuotaSandboxHours(t *testing.T) {
	t.Parallel()
	c := testclock.New()
	d := start(t, c)
	ctx := t.Context()
	if err := d.k.SetQuota(ctx, "hours", store.Quota{SandboxHours: 0.5}); err != nil {
		t.Fatal(err)
	}
	sb := d.Create(t, create.Options{Workspace: "hours", IdleTimeout: 24 * time.Hour})
	d.tickAfter(t, c, time.Second) // the first count starts the clock
	for range 70 {                 // 35 minutes
		d.tickAfter(t, c, quota.UsageEvery)
	}
	u, err := d.k.Usage(ctx, "hours")
	if err != nil || u.SandboxHours < 0.5 || u.SandboxHours > 0.6 {
		t.Fatalf("usage after 35 minutes: %+v, %v", u, err)
	}
	if _, _, err := d.M.Create(ctx, create.Options{Workspace: "hours"}); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "sandbox-hours") {
		t.Errorf("a create past the day's sandbox-hours: %v", err)
	}
	c.Advance(24 * time.Hour) // another day
	next := d.Create(t, create.Options{Workspace: "hours"})
	for _, id := range []string{sb.ID, next.ID} {
		if err := d.M.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// Creates racing for a workspace's last places: exactly as many as the
// quota allows are made.
func TestQuotaRace(t *testing.T) {
	t.Parallel()
	d := start(t, testclock.New())
	ctx := t.Context()
	if err := d.k.SetQuota(ctx, "race", store.Quota{Sandboxes: 3}); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		made []string
		errs []error
	)
	for range 8 {
		wg.Go(func() {
			sb, _, err := d.M.Create(ctx, create.Options{Workspace: "race"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			made = append(made, sb.ID)
		})
	}
	wg.Wait()
	if len(made) != 3 || len(errs) != 5 {
		t.Errorf("8 racing creates under a quota of 3: %d made, errors %v", len(made), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, errdefs.ErrResourceExhausted) {
			t.Errorf("a refused create: %v", err)
		}
	}
	for _, id := range made {
		if err := d.M.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// daemon is a core with the keeper as its hook (coretest's), on a clock
// of the test's.
type daemon struct {
	*coretest.Core
	k *quota.Keeper
}

func start(t *testing.T, c *testclock.Clock) *daemon {
	t.Helper()
	core := coretest.Start(t, func(cfg *core.Config) { cfg.Clock = c })
	return &daemon{Core: core, k: core.Quotas}
}

// tickAfter moves the clock by d and runs the keeper's tick, as the
// kernel's timers do.
func (d *daemon) tickAfter(t *testing.T, c *testclock.Clock, by time.Duration) {
	t.Helper()
	c.Advance(by)
	d.k.Tick(t.Context(), c.Now())
}

// deleteAndWait deletes sandbox id and waits for its teardown: what it
// held is free then.
func deleteAndWait(ctx context.Context, m *core.Manager, id string) error {
	if err := m.Delete(ctx, id); err != nil {
		return err
	}
	return m.AwaitTeardown(ctx, id)
}

// A running sandbox's growth counts as more memory and CPUs, not as one
// more sandbox.
func TestQuotaGrowth(t *testing.T) {
	t.Parallel()
	d := start(t, testclock.New())
	ctx := t.Context()
	if err := d.k.SetQuota(ctx, "growing", store.Quota{Sandboxes: 1, MemoryMB: 1000}); err != nil {
		t.Fatal(err)
	}
	sb := d.Create(t, create.Options{Workspace: "growing", MemoryMB: 512})
	release, err := d.k.Admit(ctx, hook.Admission{Workspace: "growing", MemoryMB: 400, Growth: true})
	if err != nil {
		t.Fatalf("a growth within the quota, the sandbox quota full: %v", err)
	}
	release()
	if _, err := d.k.Admit(ctx, hook.Admission{Workspace: "growing", MemoryMB: 600, Growth: true}); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "memory") {
		t.Errorf("a growth past the memory quota: %v; want resource exhausted", err)
	}
	if err := d.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}
