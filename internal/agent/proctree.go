package agent

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procEntry is what the agent needs from /proc/<pid>/stat.
type procEntry struct {
	pid, ppid int
	state     byte // 'R', 'S', 'Z', …
}

// scanProcs lists the processes /proc shows (thread-group leaders only).
// Processes that vanish while it reads are skipped.
func scanProcs() ([]procEntry, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, err
	}
	procs := make([]procEntry, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if e, ok := readProcStat(pid); ok {
			procs = append(procs, e)
		}
	}
	return procs, nil
}

func readProcStat(pid int) (procEntry, bool) {
	var buf [512]byte
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	n, _ := f.Read(buf[:])
	_ = f.Close()
	// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procEntry{}, false
	}
	fields := bytes.Fields(b[i+2:])
	if len(fields) < 2 || len(fields[0]) == 0 {
		return procEntry{}, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, state: fields[0][0]}, true
}

// liveDescendants returns the pids of every descendant of root that is not a
// zombie. Zombies need no killing: they are dead and their children have
// already been re-parented.
func liveDescendants(root int) ([]int, error) {
	procs, err := scanProcs()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, p := range procs {
		if p.state != 'Z' {
			children[p.ppid] = append(children[p.ppid], p.pid)
		}
	}
	var out []int
	queue := children[root]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out, nil
}

// killDescendants SIGKILLs every descendant of root until none is left
// alive, or until the deadline (processes may fork while it runs; each round
// catches what the last one missed). It does not touch root.
//
// A pid read from /proc may be reused before the kill reaches it; callers
// keep root from being reaped while this runs, and inside a sandbox the pid
// space belongs to the sandbox, so the risk is a stray SIGKILL to a process
// of the same sandbox in a window of microseconds.
func killDescendants(root int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := 200 * time.Microsecond
	for {
		pids, err := liveDescendants(root)
		if err != nil {
			return fmt.Errorf("list processes: %w", err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes under pid %d still alive after %s", len(pids), root, timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}
