package oci

// Out of memory under gVisor.
//
// gVisor's kernel has no OOM killer of its own and does not enforce memory
// cgroup limits inside (its cgroupfs memory.limit_in_bytes is stored, never
// checked; google/gvisor#1967). The limit is the host's, on the cgroup of
// the whole gVisor sandbox: left alone, the host's OOM killer picks the
// biggest process there, the gVisor kernel (the "sentry"), and one process
// over the limit ends the sandbox.
//
// Under the systrap platform each address space inside (each process) has
// a host "stub" process, and gVisor kills only that process (SIGKILL) when
// its stub dies (pkg/sentry/kernel/task_run.go, ContextStateUnexpectedDeath).
// So the host's OOM killer is steered to stubs: every stub is forked from
// one "source" stub, the sentry's child that has no children of its own,
// and inherits its oom_score_adj; raised to 1000 right after the sandbox
// starts (before any command), every process started later is a victim
// before the sentry, while the agent's stub, made before, keeps its score.
// The process dies with 137, the sandbox goes on, and the cgroup's oom_kill
// count goes up by one, which is how a command's OOM kill is told under
// runc too (see internal/core/exec's Result.Blame). Now and then, under
// load, the stub dies while gVisor's kernel is handling a page fault of its
// process: the fault fails before the stub is found dead, and the process
// ends with SIGSEGV instead, which LimitHits.OOMMayFault tells the core to
// count as the OOM kill it is.
//
// Where the daemon may lower scores (CAP_SYS_RESOURCE, which some hosts'
// root lacks: runsc then fails to start), the sentry and gofer are also
// put out of the OOM killer's reach (-1000), which covers the case stubs
// cannot: memory the sentry itself holds (tmpfs). And the host limit has
// headroom over the sandbox's (gvisorMemoryHeadroom): gVisor's kernel, its
// stubs and page tables are charged there too (about 14 MiB idle, a few
// more per process), so that a process gets about the limit it was given,
// as under runc. The headroom is added once the sandbox runs: gVisor's
// kernel sizes itself (MemTotal, its cgroups' limits) to the host limit it
// finds at start, which is then the sandbox's own. Measured on this project's hosts with bin/runsc: each of a
// 400 MiB bytearray, a gradual grower, four parallel 60 MiB allocations, a
// 400 MiB memset and a MAP_POPULATE of 400 MiB under a 128 MiB limit ended
// only its own process.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

var _ backend.MemoryWatcher = (*Runtime)(nil)

// gvisorMemoryHeadroom is what the host limit of a gVisor sandbox has over
// the sandbox's memory limit.
const gvisorMemoryHeadroom = 64 << 20

// steerOOM raises the oom_score_adj of the systrap stub source of the
// gVisor sandbox whose sentry is pid, so that the processes started from
// now on are the host's OOM victims before the sentry (see above).
func steerOOM(pid int) error {
	children, err := childrenOf(pid)
	if err != nil {
		return fmt.Errorf("find gVisor's stub processes: %w", err)
	}
	steered := 0
	for _, c := range children {
		grand, err := childrenOf(c)
		if err != nil || len(grand) > 0 {
			continue // gone, or a stub in use (its threads are its children)
		}
		path := filepath.Join("/proc", strconv.Itoa(c), "oom_score_adj")
		if err := os.WriteFile(path, []byte("1000"), 0); err != nil {
			return fmt.Errorf("raise the OOM score of gVisor's stub source %d: %w", c, err)
		}
		steered++
	}
	if steered == 0 {
		return errors.New("gVisor's stub source process was not found: an out-of-memory process may end the whole sandbox")
	}
	return nil
}

// addHeadroom raises the host memory limit of the sandbox's cgroup (rel,
// under the cgroup root) by gvisorMemoryHeadroom.
func addHeadroom(rel string) error {
	for _, file := range []string{
		filepath.Join(cgroupRoot, "memory", rel, "memory.limit_in_bytes"), // v1
		filepath.Join(cgroupRoot, rel, "memory.max"),                      // v2
	} {
		b, err := os.ReadFile(file) // #nosec G304 -- a cgroup file of a sandbox Hutch made
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil // "max": no limit to add to
		}
		return os.WriteFile(file, []byte(strconv.FormatInt(limit+gvisorMemoryHeadroom, 10)), 0)
	}
	return fmt.Errorf("no memory cgroup at %s", rel)
}

// childrenOf lists the children of every thread of process pid.
func childrenOf(pid int) ([]int, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	if err != nil || len(tasks) == 0 {
		return nil, fmt.Errorf("process %d has no tasks", pid)
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t) // #nosec G304 -- a /proc path built from a pid
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// mayLowerOOMScores reports whether this process has CAP_SYS_RESOURCE,
// which a negative oom_score_adj needs.
func mayLowerOOMScores() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if hex, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			const capSysResource = 24
			return err == nil && caps&(1<<capSysResource) != 0
		}
	}
	return false
}

// readPid reads a pid file the runtime wrote.
func readPid(path string) (int, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- a file in a sandbox directory Hutch made
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad pid file %s: %q", path, b)
	}
	return pid, nil
}

// The marks below a gVisor sandbox's host limit where the daemon has the
// agent kill the process that holds the most memory (backend.MemoryWatcher):
// the sandbox's own limit plus a quarter, a half and three quarters of the
// headroom. gVisor's kernel uses some 14 MiB of the headroom idle, so a
// process gets about the limit it was given before the first mark. The
// host's OOM killer acts only at the limit, after the last: a process
// whose memory gVisor's kernel writes for it (a read from a pipe, a file)
// is not charged to its stub on the host, and the host's choice there is
// gVisor's kernel, which holds that memory mapped.
var memoryMarks = []int64{gvisorMemoryHeadroom / 4, gvisorMemoryHeadroom / 2, 3 * gvisorMemoryHeadroom / 4}

// setMemoryMarks has the memory cgroup dir tell the eventfd efd when its
// usage crosses one of memoryMarks below its limit.
func setMemoryMarks(dir string, efd int, usage *os.File, limit int64) error {
	control := filepath.Join(dir, "cgroup.event_control")
	for _, m := range memoryMarks {
		mark := limit - gvisorMemoryHeadroom + m
		line := fmt.Sprintf("%d %d %d", efd, usage.Fd(), mark)
		if err := os.WriteFile(control, []byte(line), 0); err != nil {
			return fmt.Errorf("set a mark at %d bytes: %w", mark, err)
		}
	}
	return nil
}

// WatchMemory calls full each time sandbox h's memory goes up past one of
// its marks (see memoryMarks) as killRule says, while ctx lasts. The host
// tells through cgroup v1's usage thresholds; on cgroup v2 there are none,
// and it is not implemented. A needless kill is not harmless: the next
// process there may be the shell of the next command (it was, in CI).
func (r *Runtime) WatchMemory(ctx context.Context, h backend.Handle, full func()) error {
	if !r.cfg.StubsTakeOOMKills {
		return errdefs.NotImplemented("runtime %s has an OOM killer inside its sandboxes", r.cfg.Name)
	}
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	dir := filepath.Join(cgroupRoot, "memory", "hutch", h.ID)
	limit, err := readInt(filepath.Join(dir, "memory.limit_in_bytes"))
	if errors.Is(err, os.ErrNotExist) {
		return errdefs.NotImplemented("sandbox %s has no cgroup v1 memory controller, whose usage thresholds tell when it nears its limit", h.ID)
	}
	if err != nil {
		return err
	}
	if limit < 2*gvisorMemoryHeadroom || limit >= 1<<62 {
		return nil // no limit (or none worth a mark): the host's memory is the bound
	}
	usage, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes")) // #nosec G304 -- a cgroup file of a sandbox of this daemon
	if err != nil {
		return err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		usage.Close()
		return fmt.Errorf("watch memory of sandbox %s: %w", h.ID, err)
	}
	events := os.NewFile(uintptr(efd), "memory-marks")
	first := limit - gvisorMemoryHeadroom + memoryMarks[0]
	stop := context.AfterFunc(ctx, func() { _ = events.Close() })
	// The marks are set meanwhile, off the create's path: the kernel waits
	// for an RCU grace period at each (synchronize_rcu), 10–15 ms here,
	// which made the three a sixth of a gVisor create.
	go func() {
		defer stop()
		defer events.Close()
		err := setMemoryMarks(dir, efd, usage, limit)
		usage.Close()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("sandbox's memory not watched: past its limit, the host's OOM killer may end it whole", "sandbox_id", h.ID, "error", err)
			}
			return
		}
		buf := make([]byte, 8)
		usagePath := filepath.Join(dir, "memory.usage_in_bytes")
		rule := killRule{first: first}
		for {
			// Each crossing of a mark, up or down, and the cgroup's
			// removal, wake this read.
			if _, err := events.Read(buf); err != nil {
				return
			}
			if ctx.Err() != nil {
				return
			}
			used, err := readInt(usagePath)
			if err != nil {
				return // the cgroup is gone
			}
			if rule.crossed(used) {
				full()
				if after, err := readInt(usagePath); err == nil {
					rule.killed(after)
				}
			}
		}
	}()
	return nil
}

// killRule is when a crossing of one of a sandbox's memory marks calls for
// a kill: the usage at or above the lowest mark (first) and above the
// usage at the last crossing (a crossing down, the memory of a process
// just killed coming back to the host, is no reason to kill another), and
// above where the last kill left it. That last, as a kernel's OOM killer
// waits for its victim's memory before it picks another: the crossings the
// victim made while it was being killed (it went on allocating) wait in
// the eventfd, and its memory comes back over a few hundred milliseconds;
// measured against the usage before the kill, they took the command's
// shell next (4 of 36 memory bombs under load).
type killRule struct {
	first int64
	last  int64 // the usage at the last crossing, or after the last kill
}

// crossed takes the usage read at a crossing and says whether to kill.
func (k *killRule) crossed(used int64) bool {
	kill := used >= k.first && used > k.last
	k.last = used
	return kill
}

// killed takes the usage read once a kill has been made.
func (k *killRule) killed(after int64) { k.last = max(k.last, after) }
