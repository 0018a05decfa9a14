package core

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A create past each of a workspace's quotas is refused, saying which
// quota and its figures, and leaves nothing; other workspaces are not
// bound by it, and what a quota does not count (a suspended sandbox's
// CPUs) does not count.
func TestQuotas(t *testing.T) {
	t.Parallel()
	c := newFakeClock()
	d := newDaemonState(t).start(t, withClock(c))
	ctx := t.Context()
	tests := []struct {
		name   string
		quota  Quota
		first  CreateOptions // fits
		second CreateOptions // does not
		want   string        // in the refusal
	}{
		{"running sandboxes", Quota{Sandboxes: 1}, CreateOptions{}, CreateOptions{}, "running sandboxes: 1 of 1 run"},
		{"memory", Quota{MemoryMB: 1000}, CreateOptions{MemoryMB: 600}, CreateOptions{MemoryMB: 500}, "memory: 600 MiB of 1000 MiB in use, and this sandbox asks for 500 MiB"},
		{"cpus", Quota{CPUs: 1.5}, CreateOptions{CPUs: 1}, CreateOptions{CPUs: 1}, "CPUs: 1 of 1.5 in use, and this sandbox asks for 1"},
		{"disk", Quota{DiskMB: 3000}, CreateOptions{DiskMB: 2048}, CreateOptions{DiskMB: 2048}, "disk: 2048 MiB of 3000 MiB"},
	}
	for i, tt := range tests {
		ws := "quota-" + string(rune('a'+i))
		if err := d.m.SetQuota(ctx, ws, tt.quota); err != nil {
			t.Fatal(err)
		}
		tt.first.Workspace, tt.second.Workspace = ws, ws
		first := d.create(t, tt.first)
		before, _ := d.backend.List(ctx)
		_, err := d.m.create(ctx, tt.second)
		if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), ws) {
			t.Errorf("%s: the create past the quota: %v; want resource exhausted saying %q", tt.name, err, tt.want)
		}
		after, _ := d.backend.List(ctx)
		if len(after) != len(before) {
			t.Errorf("%s: the refused create left a sandbox: %v, was %v", tt.name, after, before)
		}
		if u, err := d.m.Usage(ctx, ws); err != nil || u.Sandboxes != 1 {
			t.Errorf("%s: usage after: %+v, %v", tt.name, u, err)
		}
		other := tt.second
		other.Workspace = "unbound"
		sb := d.create(t, other) // another workspace's quota is not this one's
		// Torn down before the next round's count of the backend's
		// sandboxes (a Delete answers before its teardown ends).
		for _, id := range []string{first.ID, sb.ID} {
			if err := d.m.DeleteAndWait(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A suspended sandbox runs no more: its place is free, its disk not.
	if err := d.m.SetQuota(ctx, "suspending", Quota{Sandboxes: 1, DiskMB: 4096}); err != nil {
		t.Fatal(err)
	}
	sb := d.create(t, CreateOptions{Workspace: "suspending"})
	if _, err := d.m.Suspend(ctx, sb.ID, "test"); err != nil {
		t.Fatal(err)
	}
	second := d.create(t, CreateOptions{Workspace: "suspending"})
	if _, err := d.m.create(ctx, CreateOptions{Workspace: "suspending", Template: "host"}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a third create: %v; want resource exhausted", err)
	}
	// Its place taken, the suspended one does not run again until one
	// stops; then it does.
	if _, err := d.m.Resume(ctx, sb.ID); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "running sandboxes") {
		t.Errorf("a resume past the quota: %v; want resource exhausted", err)
	}
	if got, err := d.m.Get(ctx, sb.ID); err != nil || got.State != store.Suspended {
		t.Errorf("the refused resume's sandbox: %+v, %v; want it suspended still", got, err)
	}
	if _, err := d.m.Stop(ctx, second.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if got, err := d.m.Resume(ctx, sb.ID); err != nil || got.State != store.Running {
		t.Errorf("a resume with room: %+v, %v", got, err)
	}
	for _, id := range []string{sb.ID, second.ID} {
		if err := d.m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// Sandbox time counts towards a day's sandbox-hours while sandboxes run;
// past the quota a create is refused until the next UTC day.
func TestQuotaSandboxHours(t *testing.T) {
	t.Parallel()
	c := newFakeClock()
	d := newDaemonState(t).start(t, withClock(c))
	ctx := t.Context()
	if err := d.m.SetQuota(ctx, "hours", Quota{SandboxHours: 0.5}); err != nil {
		t.Fatal(err)
	}
	sb := d.create(t, CreateOptions{Workspace: "hours", IdleTimeout: 24 * time.Hour})
	d.tickAfter(t, c, time.Second) // the first count starts the clock
	for range 70 {                 // 35 minutes
		d.tickAfter(t, c, usageEvery)
	}
	u, err := d.m.Usage(ctx, "hours")
	if err != nil || u.SandboxHours < 0.5 || u.SandboxHours > 0.6 {
		t.Fatalf("usage after 35 minutes: %+v, %v", u, err)
	}
	if _, err := d.m.create(ctx, CreateOptions{Workspace: "hours"}); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "sandbox-hours") {
		t.Errorf("a create past the day's sandbox-hours: %v", err)
	}
	c.advance(24 * time.Hour) // another day
	next := d.create(t, CreateOptions{Workspace: "hours"})
	for _, id := range []string{sb.ID, next.ID} {
		if err := d.m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// Creates racing for a workspace's last places: exactly as many as the
// quota allows are made.
func TestQuotaRace(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	if err := d.m.SetQuota(ctx, "race", Quota{Sandboxes: 3}); err != nil {
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
			sb, err := d.m.create(ctx, CreateOptions{Workspace: "race"})
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
		if err := d.m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
