package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/disk"
)

// Stats reads the sandbox's cgroups (cgroup v1 hierarchies, else the
// unified v2 tree) and its disk. Under gVisor the cgroups
// hold gVisor's own processes, which run the sandbox's.
func (r *Runtime) Stats(ctx context.Context, h backend.Handle) (backend.Stats, error) {
	if !validID(h.ID) {
		return backend.Stats{}, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	rel := filepath.Join("hutch", h.ID)
	var st backend.Stats
	var err error
	if _, serr := os.Stat(filepath.Join(cgroupRoot, "memory", rel)); serr == nil {
		err = readCgroupV1(&st, rel)
	} else if _, serr := os.Stat(filepath.Join(cgroupRoot, rel, "cgroup.procs")); serr == nil {
		err = readCgroupV2(&st, filepath.Join(cgroupRoot, rel))
	} else {
		return st, errdefs.NotFound("the cgroups of sandbox %s are gone", h.ID)
	}
	if err != nil {
		return st, fmt.Errorf("read cgroups of sandbox %s: %w", h.ID, err)
	}
	if r.cfg.StubsTakeOOMKills && st.MemoryLimit > gvisorMemoryHeadroom {
		st.MemoryLimit -= gvisorMemoryHeadroom // the sandbox's, not gVisor's own (see oom.go)
	}
	if st.DiskUsedBytes, err = disk.Used(r.layout(h.ID).disk); err != nil {
		return st, fmt.Errorf("size the writable layer of sandbox %s: %w", h.ID, err)
	}
	return st, nil
}

// CPUTime reads the CPU time sandbox h has used, from its cgroup
// (backend.CPUReader): one file, cgroup v1's cpuacct.usage or v2's
// cpu.stat.
func (r *Runtime) CPUTime(_ context.Context, h backend.Handle) (time.Duration, error) {
	if !validID(h.ID) {
		return 0, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	rel := filepath.Join("hutch", h.ID)
	ns, err := readInt(filepath.Join(cgroupRoot, "cpuacct", rel, "cpuacct.usage"))
	if err == nil {
		return time.Duration(ns), nil
	}
	us, err2 := readField(filepath.Join(cgroupRoot, rel, "cpu.stat"), "usage_usec")
	if err2 != nil {
		return 0, errdefs.NotFound("the cgroups of sandbox %s are gone", h.ID)
	}
	return time.Duration(us) * time.Microsecond, nil
}

func readCgroupV1(st *backend.Stats, rel string) error {
	var r numbers
	v1 := func(controller, file string) int64 { return r.read(filepath.Join(cgroupRoot, controller, rel, file)) }
	st.CPUTime = time.Duration(v1("cpuacct", "cpuacct.usage")) // ns
	if quota, period := v1("cpu", "cpu.cfs_quota_us"), v1("cpu", "cpu.cfs_period_us"); quota > 0 && period > 0 {
		st.CPULimit = float64(quota) / float64(period) // -1: no quota
	}
	st.MemoryBytes = v1("memory", "memory.usage_in_bytes")
	st.MemoryPeak = v1("memory", "memory.max_usage_in_bytes")
	st.MemoryLimit = v1("memory", "memory.limit_in_bytes")
	st.Pids = v1("pids", "pids.current")
	st.PidsLimit = v1("pids", "pids.max")
	return r.err
}

func readCgroupV2(st *backend.Stats, dir string) error {
	var r numbers
	v2 := func(file string) int64 { return r.read(filepath.Join(dir, file)) }
	st.CPUTime = time.Duration(r.field(filepath.Join(dir, "cpu.stat"), "usage_usec")) * time.Microsecond
	st.CPULimit, r.err = cpuMax(filepath.Join(dir, "cpu.max"), r.err)
	st.MemoryBytes = v2("memory.current")
	st.MemoryPeak = v2("memory.peak")
	st.MemoryLimit = v2("memory.max")
	st.Pids = v2("pids.current")
	st.PidsLimit = v2("pids.max")
	return r.err
}

// cpuMax reads a cgroup v2 cpu.max ("quota period", or "max period" for
// no quota) as CPUs, adding a failure to errs.
func cpuMax(path string, errs error) (float64, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- a file of the sandbox's own cgroup
	if err != nil {
		return 0, errors.Join(errs, err)
	}
	var quota string
	var period int64
	if _, err := fmt.Sscan(string(b), &quota, &period); err != nil {
		return 0, errors.Join(errs, fmt.Errorf("read %s: %w", path, err))
	}
	if quota == "max" || period <= 0 {
		return 0, errs
	}
	q, err := strconv.ParseInt(quota, 10, 64)
	if err != nil {
		return 0, errors.Join(errs, fmt.Errorf("read %s: %w", path, err))
	}
	return float64(q) / float64(period), errs
}

// numbers reads numbers from cgroup files, gathering the errors.
type numbers struct{ err error }

func (n *numbers) read(path string) int64 {
	v, err := readInt(path)
	n.err = errors.Join(n.err, err)
	return v
}

func (n *numbers) field(path, key string) int64 {
	v, err := readField(path, key)
	n.err = errors.Join(n.err, err)
	return v
}

// LimitHits reads oom_kill of the sandbox's memory cgroup (memory.oom_control
// in v1, memory.events in v2) and, unless the process limit is gVisor's
// own, max of its pids cgroup (pids.events).
func (r *Runtime) LimitHits(_ context.Context, h backend.Handle) (backend.LimitHits, error) {
	if !validID(h.ID) {
		return backend.LimitHits{}, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	rel := filepath.Join("hutch", h.ID)
	// The first file of each pair that is there: cgroup v1, else v2.
	read := func(v1, v2, key string) (int64, error) {
		for _, path := range []string{v1, v2} {
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				continue
			}
			return readField(path, key)
		}
		return 0, errdefs.NotFound("the cgroups of sandbox %s are gone", h.ID)
	}
	hits := backend.LimitHits{OOMMayFault: r.cfg.StubsTakeOOMKills}
	var err error
	hits.OOMKills, err = read(filepath.Join(cgroupRoot, "memory", rel, "memory.oom_control"),
		filepath.Join(cgroupRoot, rel, "memory.events"), "oom_kill")
	if err == nil && hits.OOMMayFault {
		hits.MemoryFull, err = memoryFull(rel)
	}
	if err != nil || r.cfg.KernelCountsProcesses {
		return hits, err
	}
	hits.PidsMax, err = read(filepath.Join(cgroupRoot, "pids", rel, "pids.events"),
		filepath.Join(cgroupRoot, rel, "pids.events"), "max")
	if tenant := filepath.Join(cgroupRoot, "pids", rel, tenantCgroup, "pids.events"); err == nil && exists(tenant) {
		// The sandbox's processes' forks (see tenantCgroup).
		n, terr := readField(tenant, "max")
		hits.PidsMax, err = hits.PidsMax+n, terr
	}
	return hits, err
}

// memoryFull reads how many times the cgroup rel (under the cgroup root)
// reached its memory limit.
func memoryFull(rel string) (int64, error) {
	n, err := readInt(filepath.Join(cgroupRoot, "memory", rel, "memory.failcnt"))
	if errors.Is(err, os.ErrNotExist) {
		return readField(filepath.Join(cgroupRoot, rel, "memory.events"), "max")
	}
	return n, err
}

// readField reads the number after key in a cgroup file of "key number"
// lines (memory.oom_control, memory.events, cpu.stat).
func readField(path, key string) (int64, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- a cgroup file of a sandbox Hutch made
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(n, 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, key)
}

// readInt reads a cgroup file holding one number; "max" (no limit) is -1.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- a cgroup file of a sandbox Hutch made
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
