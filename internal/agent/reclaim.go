package agent

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Out of memory without a kernel OOM killer.
//
// gVisor's kernel has none: a sandbox past its memory limit meets the
// host's, whose victim may be the gVisor kernel itself (see
// internal/runtime/oci/oom.go), which ends every process of the sandbox.
// So the daemon, told by the host that the sandbox nears its limit, asks
// the agent to do what Linux's OOM killer would: kill the process holding
// the most memory. The agent and its shims (the processes that run its
// binary) are never chosen, nor a process whose oom_score_adj is -1000,
// Linux's "never".

// victim is the process reclaimMemory killed.
type victim struct {
	pid  int
	name string
	rss  uint64 // bytes
}

// reclaimMemory kills the process with the most resident memory that may
// be killed; a zero victim when there is none.
func reclaimMemory() (victim, error) {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return victim{}, err
	}
	pids, err := listPIDs()
	if err != nil {
		return victim{}, err
	}
	page := uint64(os.Getpagesize()) // #nosec G115 -- a page size is positive
	me := os.Getpid()
	var candidates []victim
	for _, pid := range pids {
		if pid == me {
			continue
		}
		rss, ok := residentPages(pid)
		if ok && rss > 0 {
			candidates = append(candidates, victim{pid: pid, rss: rss * page})
		}
	}
	// The biggest first; the checks that cost more are made in that order
	// until one passes.
	slices.SortFunc(candidates, func(a, b victim) int { return cmp.Compare(b.rss, a.rss) })
	for _, c := range candidates {
		dir := filepath.Join("/proc", strconv.Itoa(c.pid))
		if exe, err := os.Stat(filepath.Join(dir, "exe")); err == nil && os.SameFile(exe, self) {
			continue // the agent's own binary: a shim
		}
		// #nosec G304 -- a /proc path built from a pid
		adj, err := os.ReadFile(filepath.Join(dir, "oom_score_adj"))
		if err == nil && strings.TrimSpace(string(adj)) == "-1000" {
			continue
		}
		// #nosec G304 -- a /proc path built from a pid
		if comm, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
			c.name = strings.TrimSpace(string(comm))
		}
		if err := syscall.Kill(c.pid, syscall.SIGKILL); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				continue // ended meanwhile
			}
			return victim{}, err
		}
		return c, nil
	}
	return victim{}, nil
}

// residentPages reads the resident pages of process pid from its statm.
func residentPages(pid int) (uint64, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "statm")) // #nosec G304 -- a /proc path built from a pid
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	return n, err == nil
}
