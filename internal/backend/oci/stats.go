package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/errdefs"
)

// Stats reads the sandbox's cgroups (cgroup v1 hierarchies, else the
// unified v2 tree) and sizes its writable layer. Under gVisor the cgroups
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
	if st.DiskUsedBytes, err = diskUsed(ctx, r.layout(h.ID).upper); err != nil {
		return st, fmt.Errorf("size the writable layer of sandbox %s: %w", h.ID, err)
	}
	return st, nil
}

func readCgroupV1(st *backend.Stats, rel string) error {
	v1 := func(controller, file string) (int64, error) {
		return readInt(filepath.Join(cgroupRoot, controller, rel, file))
	}
	cpu, err1 := v1("cpuacct", "cpuacct.usage") // ns
	st.CPUTime = time.Duration(cpu)
	var err2, err3, err4, err5, err6 error
	st.MemoryBytes, err2 = v1("memory", "memory.usage_in_bytes")
	st.MemoryPeak, err3 = v1("memory", "memory.max_usage_in_bytes")
	st.MemoryLimit, err4 = v1("memory", "memory.limit_in_bytes")
	st.Pids, err5 = v1("pids", "pids.current")
	st.PidsLimit, err6 = v1("pids", "pids.max")
	return errors.Join(err1, err2, err3, err4, err5, err6)
}

func readCgroupV2(st *backend.Stats, dir string) error {
	v2 := func(file string) (int64, error) { return readInt(filepath.Join(dir, file)) }
	var err1, err2, err3, err4, err5 error
	st.MemoryBytes, err1 = v2("memory.current")
	st.MemoryPeak, err2 = v2("memory.peak")
	st.MemoryLimit, err3 = v2("memory.max")
	st.Pids, err4 = v2("pids.current")
	st.PidsLimit, err5 = v2("pids.max")
	b, err6 := os.ReadFile(filepath.Join(dir, "cpu.stat")) // #nosec G304 -- a cgroup file of a sandbox Hutch made
	for _, line := range strings.Split(string(b), "\n") {
		if us, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(us, 10, 64)
			err6 = errors.Join(err6, err)
			st.CPUTime = time.Duration(n) * time.Microsecond
		}
	}
	return errors.Join(err1, err2, err3, err4, err5, err6)
}

// OOMKills reads oom_kill of the sandbox's memory cgroup (memory.oom_control
// in v1, memory.events in v2).
func (r *Runtime) OOMKills(_ context.Context, h backend.Handle) (int64, error) {
	if !validID(h.ID) {
		return 0, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	rel := filepath.Join("hutch", h.ID)
	for _, path := range []string{
		filepath.Join(cgroupRoot, "memory", rel, "memory.oom_control"),
		filepath.Join(cgroupRoot, rel, "memory.events"),
	} {
		b, err := os.ReadFile(path) // #nosec G304 -- a cgroup file of a sandbox Hutch made
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
				return strconv.ParseInt(n, 10, 64)
			}
		}
		return 0, fmt.Errorf("%s has no oom_kill count", path)
	}
	return 0, errdefs.NotFound("the memory cgroup of sandbox %s is gone", h.ID)
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

// diskUsed is what the files under dir take on disk (allocated blocks, so
// sparse files count for what they hold). Hard links count once.
func diskUsed(ctx context.Context, dir string) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by the sandbox meanwhile
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}
