package quota_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/testclock"
	"github.com/hutchdev/hutch/internal/core/quota"
)

// A build step gets what its workspace's quota leaves, up to what it asks,
// counts with the workspace's sandboxes until its release, and is refused
// below its floors; a workspace without a quota gives what it asks.
func TestAdmitBuildStep(t *testing.T) {
	t.Parallel()
	d := start(t, testclock.New())
	ctx := t.Context()
	want := quota.StepLimits{MemoryMB: 4096, CPUs: 8, DiskMB: 16384}

	if got, release, err := d.k.AdmitBuildStep(ctx, "free", want); err != nil || got != want {
		t.Errorf("a step of a workspace without a quota: %+v, %v; want %+v", got, err, want)
	} else {
		release()
	}

	if err := d.k.SetQuota(ctx, "acme", store.Quota{Sandboxes: 2, MemoryMB: 1536, CPUs: 2, DiskMB: 4096}); err != nil {
		t.Fatal(err)
	}
	sb := d.Create(t, create.Options{Workspace: "acme", MemoryMB: 1024, CPUs: 1, DiskMB: 2048})
	t.Cleanup(func() {
		if err := deleteAndWait(context.WithoutCancel(ctx), d.M, sb.ID); err != nil {
			t.Error(err)
		}
	})
	got, release, err := d.k.AdmitBuildStep(ctx, "acme", want)
	if err != nil || got != (quota.StepLimits{MemoryMB: 512, CPUs: 1, DiskMB: 2048}) {
		t.Fatalf("a step beside a sandbox: %+v, %v; want what the quota leaves", got, err)
	}
	if u, err := d.k.Usage(ctx, "acme"); err != nil || u.Sandboxes != 2 || u.MemoryMB != 1536 || u.CPUs != 2 || u.DiskMB != 4096 {
		t.Errorf("usage with the step in flight: %+v, %v", u, err)
	}
	if _, _, err := d.M.Create(ctx, create.Options{Workspace: "acme", MemoryMB: 128}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a create while the step holds the rest: %v, want resource exhausted", err)
	}
	if _, _, err := d.k.AdmitBuildStep(ctx, "acme", want); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "running sandboxes") {
		t.Errorf("a second step: %v, want resource exhausted", err)
	}
	release()
	release() // once is enough
	if u, err := d.k.Usage(ctx, "acme"); err != nil || u.Sandboxes != 1 || u.MemoryMB != 1024 {
		t.Errorf("usage after the step: %+v, %v", u, err)
	}

	// Below a floor, refused, saying which.
	if err := d.k.SetQuota(ctx, "acme", store.Quota{MemoryMB: 1200}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.k.AdmitBuildStep(ctx, "acme", want); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "quota of memory") || !strings.Contains(err.Error(), "256 MiB at least") {
		t.Errorf("a step with 176 MiB left: %v, want resource exhausted", err)
	}
	// A quota below the floor is the floor.
	if err := d.k.SetQuota(ctx, "tiny", store.Quota{MemoryMB: 128, CPUs: 0.1}); err != nil {
		t.Fatal(err)
	}
	if got, release, err := d.k.AdmitBuildStep(ctx, "tiny", want); err != nil || got.MemoryMB != 128 || got.CPUs != 0.1 {
		t.Errorf("a step of a tiny quota: %+v, %v", got, err)
	} else {
		release()
	}
}
