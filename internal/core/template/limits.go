package template

import (
	"context"
	"fmt"
	"runtime"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// A workspace's builds, pulls and imports are bounded by its quota, as its
// sandboxes are; the administrator's shared ones keep the daemon's own
// limits. Whose a build is is told by the template's stored name: NAME~WS
// is workspace WS's, whoever makes it (the administrator too), and a
// shared name the administrator's (only its key makes those).
//
//   - Each build step is admitted against the workspace's quota as a
//     sandbox is (quota.Keeper.AdmitBuildStep): it counts with the
//     workspace's sandboxes while it runs, and runs with what the quota
//     leaves of memory, CPUs and disk, up to the administrator's limits
//     (buildMemoryMB, all CPUs, buildDiskMB).
//   - What a build puts on disk is bounded by the workspace's disk quota,
//     or workspaceBuildDiskMB when it has none: the root an image's layers
//     unpack to (and the archive an import uploads), and what a
//     Debian or Hutchfile build's steps add to the root it started from,
//     measured before and after each step (each step's writable layer
//     gets what is left). Past it the build stops with
//     errdefs.ErrResourceExhausted, and leaves nothing.

// workspaceBuildDiskMB bounds what a build of a workspace without a disk
// quota puts on disk: as much as one build step's disk.
const workspaceBuildDiskMB = buildDiskMB

// minStepDiskMB is the least disk a step's sandbox is made with: its
// writable layer's file system needs a few MiB of its own.
const minStepDiskMB = 64

// buildLimits say what bounds one build.
type buildLimits struct {
	// admin is set for the administrator's build: no admission, the
	// daemon's own limits, no bound on its disk.
	admin bool
	// workspace is whose quota admits its steps.
	workspace string
	// maxBytes bounds what the build puts on disk; 0 for no bound.
	maxBytes int64
	// why says where maxBytes comes from, for a refusal.
	why string
}

// limitsOf is what bounds the build of template name (its stored name),
// asked for by a caller of workspace ws, or the administrator (admin).
func (s *Service) limitsOf(ctx context.Context, name, ws string, admin bool) (buildLimits, error) {
	if _, owner := workspace.Split(name); owner != "" {
		ws = owner
	} else if admin {
		return buildLimits{admin: true}, nil
	}
	var q store.Quota
	if s.quotas != nil {
		var err error
		if q, err = s.quotas.WorkspaceQuota(ctx, ws); err != nil {
			return buildLimits{}, err
		}
	}
	if q.DiskMB > 0 {
		return buildLimits{workspace: ws, maxBytes: q.DiskMB << 20,
			why: fmt.Sprintf("a template build of workspace %s puts at most %d MiB on disk, its disk quota", ws, q.DiskMB)}, nil
	}
	return buildLimits{workspace: ws, maxBytes: workspaceBuildDiskMB << 20,
		why: fmt.Sprintf("a template build of a workspace without a disk quota puts at most %d MiB on disk", workspaceBuildDiskMB)}, nil
}

// adminStep is what an administrator's build step runs with.
func adminStep() quota.StepLimits {
	return quota.StepLimits{MemoryMB: buildMemoryMB, CPUs: float64(runtime.NumCPU()), DiskMB: buildDiskMB}
}

// runner is the rootfs.Runner of one build bounded by l: it admits
// each step against l's workspace's quota, and keeps what the steps add
// to the root within l.maxBytes.
func (s *Service) runner(l buildLimits) rootfs.Runner {
	if l.admin {
		return func(ctx context.Context, root string, step rootfs.RunStep) error {
			return s.runBuildStep(ctx, root, step, adminStep())
		}
	}
	base := int64(-1) // the root's size before the build's first step
	return func(ctx context.Context, root string, step rootfs.RunStep) error {
		size, err := rootfs.DiskUsage(root)
		if err != nil {
			return fmt.Errorf("size of the build's root: %w", err)
		}
		if base < 0 {
			base = size
		}
		left := (l.maxBytes - (size - base)) >> 20
		if left < minStepDiskMB {
			return errdefs.ResourceExhausted("%s, and its steps have put %d MiB there", l.why, (size-base)>>20)
		}
		want := adminStep()
		want.DiskMB = min(want.DiskMB, left)
		limits := want
		if s.quotas != nil {
			var release func()
			if limits, release, err = s.quotas.AdmitBuildStep(ctx, l.workspace, want); err != nil {
				return err
			}
			defer release()
		}
		if err := s.runBuildStep(ctx, root, step, limits); err != nil {
			return err
		}
		if size, err = rootfs.DiskUsage(root); err != nil {
			return fmt.Errorf("size of the build's root: %w", err)
		}
		if size-base > l.maxBytes {
			return errdefs.ResourceExhausted("%s, and its steps have put %d MiB there", l.why, (size-base)>>20)
		}
		return nil
	}
}
