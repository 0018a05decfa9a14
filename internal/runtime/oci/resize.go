package oci

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/disk"
)

// Resize writes a running sandbox's new limits into its cgroups, as its
// spec set them at its start (spec.go): the CPU quota, under either
// runtime; the memory limit and the tasks' under runc. gVisor sizes its
// kernel's memory at its start and counts processes itself: those change
// at the next start (a suspend, then a resume). A memory limit below what
// the sandbox uses is refused: lowering it would have the kernel kill its
// processes. A write that fails is reported; those before it stay.
func (r *Runtime) Resize(_ context.Context, h backend.Handle, l backend.Limits) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	if r.cfg.KernelCountsProcesses && (l.MemoryBytes != 0 || l.Pids != 0) {
		return errdefs.FailedPrecondition("runtime %s sizes a sandbox's memory and counts its processes at its start: suspend it, change them, and resume it", r.cfg.Name)
	}
	rel := filepath.Join("hutch", h.ID)
	v1 := func(controller, file string) string { return filepath.Join(cgroupRoot, controller, rel, file) }
	v2 := func(file string) string { return filepath.Join(cgroupRoot, rel, file) }
	_, err := os.Stat(v1("memory", ""))
	legacy := err == nil
	var writes []cgroupWrite
	if l.MemoryBytes != 0 {
		st, err := r.Stats(context.Background(), h)
		if err != nil {
			return err
		}
		if st.MemoryBytes > l.MemoryBytes {
			return errdefs.FailedPrecondition("sandbox %s uses %d MiB, more than the %d MiB asked: free memory in it first, or suspend it and change the limit for its next start",
				h.ID, st.MemoryBytes>>20, l.MemoryBytes>>20)
		}
		limit := strconv.FormatInt(l.MemoryBytes, 10)
		if legacy {
			writes = append(writes, cgroupWrite{v1("memory", "memory.limit_in_bytes"), limit})
		} else {
			writes = append(writes, cgroupWrite{v2("memory.max"), limit})
		}
	}
	if l.CPUs != 0 {
		quota := int64(math.Round(l.CPUs * cpuPeriod))
		if legacy {
			writes = append(writes, cgroupWrite{v1("cpu", "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)})
		} else {
			writes = append(writes, cgroupWrite{v2("cpu.max"), fmt.Sprintf("%d %d", quota, cpuPeriod)})
		}
	}
	if l.Pids != 0 {
		limit := strconv.FormatInt(l.Pids+agentv1.Threads, 10)
		if legacy {
			writes = append(writes, cgroupWrite{v1("pids", "pids.max"), limit})
			if tenant := v1("pids", tenantCgroup); exists(tenant) {
				writes = append(writes, cgroupWrite{filepath.Join(tenant, "pids.max"), strconv.FormatInt(l.Pids, 10)})
			}
		} else {
			writes = append(writes, cgroupWrite{v2("pids.max"), limit})
		}
	}
	var errs []error
	for _, w := range writes {
		// #nosec G306 -- a cgroup file of the sandbox's own; its mode is the kernel's
		if err := os.WriteFile(w.file, []byte(w.value), 0); err != nil {
			errs = append(errs, fmt.Errorf("set %s of sandbox %s: %w", filepath.Base(w.file), h.ID, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupWrite is a value for a cgroup file.
type cgroupWrite struct{ file, value string }

// GrowDisk grows sandbox h's disk to bytes (disk.Pool.Grow), whether it
// runs or not: its disk stays mounted while it is suspended.
func (r *Runtime) GrowDisk(_ context.Context, h backend.Handle, bytes int64) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	err := r.cfg.Disks.Grow(r.layout(h.ID).disk, bytes>>20)
	if errors.Is(err, disk.ErrShrink) || errors.Is(err, disk.ErrNoGrowth) {
		return errdefs.FailedPrecondition("sandbox %s: %v", h.ID, err)
	}
	return err
}
