package backendtest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// stats reads the sandbox's use, failing the test if that fails.
func (s *suite) stats(t *testing.T, sb *sandbox) backend.Stats {
	t.Helper()
	st, err := s.backend.Stats(t.Context(), sb.handle)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// testStats checks that Stats reports the spec's limits and follows what the
// sandbox does: CPU time for a busy loop, disk for a file written.
func (s *suite) testStats(t *testing.T) {
	if !s.h.Limits {
		t.Skip("the backend enforces no limits and reports no use")
	}
	sb := s.create(t)
	before := s.stats(t, sb)
	lim := sb.spec.Limits
	if before.MemoryLimit != lim.MemoryBytes {
		t.Errorf("MemoryLimit = %d, want the spec's %d", before.MemoryLimit, lim.MemoryBytes)
	}
	if lim.CPUs > 0 && math.Abs(before.CPULimit-lim.CPUs) > 0.01 {
		t.Errorf("CPULimit = %v, want the spec's %v", before.CPULimit, lim.CPUs)
	}
	if want := lim.Pids + s.h.ExtraPids; before.PidsLimit != want {
		t.Errorf("PidsLimit = %d, want %d (the spec's %d + %d for the runtime)", before.PidsLimit, want, lim.Pids, s.h.ExtraPids)
	}
	if before.MemoryBytes <= 0 || before.MemoryPeak < before.MemoryBytes {
		t.Errorf("memory now %d, peak %d: want a positive use, and a peak at least as high", before.MemoryBytes, before.MemoryPeak)
	}
	if before.Pids < 1 || before.Pids > before.PidsLimit {
		t.Errorf("Pids = %d, want at least the agent and at most the limit %d", before.Pids, before.PidsLimit)
	}

	// A fixed amount of work, not a time: a second of busy loop got a
	// quarter of a CPU on a loaded host. A million rounds of the shell's
	// arithmetic take about a second of CPU here, whatever the load.
	if r := sb.sh(t, `i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done; echo $i`); r.exitCode != 0 {
		t.Fatalf("busy loop exited %d; stderr: %s", r.exitCode, r.stderr)
	}
	// 8 MiB that do not compress or stay sparse, in the writable layer.
	sb.mustSh(t, "head -c 8388608 /dev/urandom > ballast && sync")
	after := s.stats(t, sb)
	if grew := after.CPUTime - before.CPUTime; grew < 250*time.Millisecond {
		t.Errorf("CPUTime grew by %v over a busy loop of about a second of CPU, want 250ms or more", grew)
	}
	if grew := after.DiskUsedBytes - before.DiskUsedBytes; grew < 7<<20 {
		t.Errorf("DiskUsedBytes grew by %d after writing 8 MiB, want 7 MiB or more", grew)
	}
	// The CPU time read alone is the one Stats reads (a little later).
	if r := s.backend.Capabilities().CPU; r != nil {
		used, err := r.CPUTime(t.Context(), sb.handle)
		if err != nil || used < after.CPUTime || used-after.CPUTime > 100*time.Millisecond {
			t.Errorf("CPUTime = %v, %v; want Stats's %v or a little more", used, err, after.CPUTime)
		}
	}
}

// limitHits reads the sandbox's limit hits, failing the test if that fails.
func (s *suite) limitHits(t *testing.T, sb *sandbox) backend.LimitHits {
	t.Helper()
	hits, err := s.backend.LimitHits(t.Context(), sb.handle)
	if err != nil {
		t.Fatalf("LimitHits: %v", err)
	}
	return hits
}

// testOOMKills checks that a command past the memory limit is killed and
// counted, and that the sandbox lives on.
func (s *suite) testOOMKills(t *testing.T) {
	switch {
	case !s.h.Limits:
		t.Skip("the backend enforces no memory limit")
	case !s.h.CountsOOMKills:
		t.Skip("the backend's memory limit stops the whole sandbox, not a command")
	}
	sb := s.create(t, func(spec *backend.Spec) { spec.Limits.MemoryBytes = 64 << 20 })
	before := s.limitHits(t, sb)
	// tail keeps the last line, and /dev/zero has no line ends: it grows
	// to 1 GiB unless killed.
	const bomb = "head -c 1G /dev/zero | tail"
	r, err := tryRun(t.Context(), sb.agent, "", bomb)
	if err != nil {
		t.Fatalf("%v\nafterwards: %s", err, s.afterBreak(t, sb))
	}
	if r.exitCode == 0 {
		t.Fatal("a 1 GiB memory bomb under a 64 MiB limit exited 0")
	}
	after := s.limitHits(t, sb)
	if after.OOMKills <= before.OOMKills {
		t.Errorf("OOM kills went from %d to %d over a memory bomb, want them to grow", before.OOMKills, after.OOMKills)
	}
	if got := sb.mustSh(t, "echo alive"); got != "alive\n" {
		t.Errorf("after the OOM kill the sandbox answers %q", got)
	}
}

// afterBreak says what is known of a sandbox whose command stream broke
// off: whether its agent still answers, what it logged, and what the
// limits counted.
func (s *suite) afterBreak(t *testing.T, sb *sandbox) string {
	var b strings.Builder
	if r, err := tryRun(t.Context(), sb.agent, "", "echo alive"); err != nil {
		fmt.Fprintf(&b, "the agent does not answer (%v)", err)
	} else {
		fmt.Fprintf(&b, "the agent answers (echo exits %d)", r.exitCode)
	}
	if hits, err := s.backend.LimitHits(t.Context(), sb.handle); err == nil {
		fmt.Fprintf(&b, "; limit hits %+v", hits)
	}
	if s.h.AgentLog != nil {
		fmt.Fprintf(&b, "; agent log: %q", s.h.AgentLog(sb.handle))
	}
	return b.String()
}

// testPidsMax checks that forks past the process limit fail, are counted
// where the backend can, and that the sandbox lives on: its agent answers
// while the sandbox's processes hold the limit (the Go runtime ends a
// process that cannot make a thread it needs, which a busy agent then
// would), and commands run once they are gone. The children are root's,
// the agent's own user, whose count gVisor's limit (RLIMIT_NPROC) shares
// with the agent's threads.
func (s *suite) testPidsMax(t *testing.T) {
	if !s.h.Limits {
		t.Skip("the backend enforces no process limit")
	}
	sb := s.create(t, func(spec *backend.Spec) { spec.Limits.Pids = 16 })
	before := s.limitHits(t, sb)
	started := time.Now()
	if r := sb.shAsRoot(t, forkPast(32, 3)); r.exitCode == 0 || !strings.Contains(r.stderr, "fork failed") {
		t.Fatalf("32 children under a limit of 16: exit %d, %q", r.exitCode, r.stderr)
	}
	if after := s.limitHits(t, sb); s.h.CountsPidsMax && after.PidsMax <= before.PidsMax {
		t.Errorf("refused forks went from %d to %d, want them to grow", before.PidsMax, after.PidsMax)
	}
	// Calls that need no process, many at once, while the children hold
	// the limit.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				if _, err := sb.agent.Stat(t.Context(), "/etc/passwd", ""); err != nil {
					t.Errorf("stat while the process limit is held: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The children hold the limit for 3 s, during which a new command
	// may not start (its shim cannot be made, or dies making a thread);
	// then commands run, once the last of them is gone, which on a
	// loaded host comes a while after (CI saw a shim die at 4 s).
	time.Sleep(time.Until(started.Add(4 * time.Second)))
	for {
		r, err := tryRun(t.Context(), sb.agent, "", "echo alive")
		if err == nil && r.exitCode == 0 && r.stdout == "alive\n" {
			return
		}
		if time.Since(started) > 20*time.Second {
			t.Fatalf("20 s after the children, whose limit was held for 3 s: exit %d, %q, %q, %v", r.exitCode, r.stdout, r.stderr, err)
		}
		t.Logf("%.1f s after the children: exit %d, %q, %v; again", time.Since(started).Seconds(), r.exitCode, r.stderr, err)
		time.Sleep(500 * time.Millisecond)
	}
}

// testProcessCgroup checks that the sandbox's processes are in a pids
// cgroup of their own below the agent's, whose limit is theirs, and that
// root among them cannot move into the agent's cgroup, whose limit leaves
// room for the agent's threads.
func (s *suite) testProcessCgroup(t *testing.T) {
	if s.h.ProcessCgroup == "" {
		t.Skip("the sandbox's processes share the agent's cgroup")
	}
	sb := s.create(t, func(spec *backend.Spec) { spec.Limits.Pids = 16 })
	script := `cg() { sed -n 's/^[0-9]*:pids://p' "$1"; }
cg /proc/self/cgroup
for t in /proc/1/task/*; do cg $t/cgroup; done | sort -u | tr '\n' ' '; echo
cat /sys/fs/cgroup/pids` + s.h.ProcessCgroup + `/pids.max
echo $$ > /sys/fs/cgroup/pids/cgroup.procs && echo moved
cg /proc/self/cgroup`
	r := sb.shAsRoot(t, script)
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 {
		t.Fatalf("%q: exit %d, %q, %q", script, r.exitCode, r.stdout, r.stderr)
	}
	if lines[0] != s.h.ProcessCgroup {
		t.Errorf("a command's pids cgroup is %q, want %q", lines[0], s.h.ProcessCgroup)
	}
	if agent := strings.Fields(lines[1]); !slices.Contains(agent, "/") {
		t.Errorf("the agent's threads are in pids cgroups %q, want the sandbox's own (\"/\") among them", agent)
	}
	if lines[2] != "16" {
		t.Errorf("the processes' cgroup has pids.max %q, want the spec's 16", lines[2])
	}
	if strings.Contains(r.stdout, "moved") || lines[3] != s.h.ProcessCgroup {
		t.Errorf("root moved itself into the agent's cgroup: %q, %q", r.stdout, r.stderr)
	}

	// A new limit is the processes' cgroup's, and the agent's room above.
	resizer := s.backend.Capabilities().Resize
	if resizer == nil {
		return
	}
	if err := resizer.Resize(t.Context(), sb.handle, backend.Limits{Pids: 24}); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if got := sb.mustSh(t, "cat /sys/fs/cgroup/pids"+s.h.ProcessCgroup+"/pids.max"); got != "24\n" {
		t.Errorf("after a resize to 24 processes the processes' cgroup has pids.max %q", got)
	}
	if st := s.stats(t, sb); st.PidsLimit != 24+s.h.ExtraPids {
		t.Errorf("after a resize to 24 processes PidsLimit = %d, want %d", st.PidsLimit, 24+s.h.ExtraPids)
	}
}

// forkPast is a script that forks n children, each sleeping hold seconds
// with its output closed, and dies with "fork failed" at the first refused
// fork.
func forkPast(n, hold int) string {
	return fmt.Sprintf(`perl -e 'for (1..%d) { my $p = fork; die "fork failed: $!\n" unless defined $p; if (!$p) { close STDOUT; close STDERR; sleep %d; exit } }'`, n, hold)
}

// testDiskLimit checks that writing past Spec.Limits.DiskBytes fails inside
// with ENOSPC, /tmp included, and that freeing space gives it back.
func (s *suite) testDiskLimit(t *testing.T) {
	if !s.h.Limits {
		t.Skip("the backend enforces no disk limit")
	}
	sb := s.create(t, func(spec *backend.Spec) { spec.Limits.DiskBytes = 64 << 20 })
	r := sb.sh(t, "dd if=/dev/zero of=/tmp/fill bs=1M count=128")
	if r.exitCode == 0 || !strings.Contains(r.stderr, "No space left on device") {
		t.Fatalf("writing 128 MiB to /tmp under a 64 MiB disk limit: exit %d, stderr %q; want ENOSPC", r.exitCode, r.stderr)
	}
	if used := s.stats(t, sb).DiskUsedBytes; used < 48<<20 || used > 64<<20 {
		t.Errorf("DiskUsedBytes = %d on a full 64 MiB disk, want 48–64 MiB", used)
	}
	sb.mustSh(t, "rm /tmp/fill && head -c 1048576 /dev/zero > after")
}
