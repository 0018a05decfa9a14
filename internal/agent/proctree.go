package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
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
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	procs := make([]procEntry, 0, len(pids))
	for _, pid := range pids {
		if e, ok := readProcStat(pid); ok {
			procs = append(procs, e)
		}
	}
	return procs, nil
}

// listPIDs lists the pids /proc shows. It reads the directory with plain
// system calls: an os.File costs one more per listing (os.Open five).
func listPIDs() ([]int, error) {
	fd, err := syscall.Open("/proc", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/proc", Err: err}
	}
	defer syscall.Close(fd)
	var (
		buf   [8 << 10]byte
		names []string
	)
	for {
		n, err := syscall.ReadDirent(fd, buf[:])
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: "/proc", Err: err}
		}
		if n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func readProcStat(pid int) (procEntry, bool) {
	// Plain syscalls: os.Open would also try to add the file to the poller,
	// one more syscall per process on every scan.
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procEntry{}, false
	}
	var buf [512]byte
	n, err := syscall.Read(fd, buf[:])
	_ = syscall.Close(fd)
	if err != nil || n <= 0 {
		return procEntry{}, false
	}
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

// LiveDescendants returns the pids of every descendant of root that is not a
// zombie. Zombies need no killing: they are dead and their children have
// already been re-parented.
func LiveDescendants(root int) ([]int, error) {
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

// treeOf returns the processes of procs, zombies included, whose chain of
// parents reaches root without passing through a process for which cut is
// true; root itself is not part of it. procs is one read of /proc: when a
// parent exited while it was read, its child has been re-parented by the
// time the parent is missing, so the child's parent is read again.
func treeOf(procs []procEntry, root int, cut func(pid int) bool) []procEntry {
	byPID := make(map[int]procEntry, len(procs))
	for _, p := range procs {
		byPID[p.pid] = p
	}
	ours := make(map[int]bool, len(procs)) // settled answers
	var out []procEntry
	var path []int
	for _, p := range procs {
		if p.pid == root {
			continue
		}
		path = path[:0]
		in, pid, rereads := false, p.pid, 0
		for len(path) <= len(procs) { // longer only on a loop through a reused pid
			if v, ok := ours[pid]; ok {
				in = v
				break
			}
			if cut(pid) {
				break
			}
			e, ok := byPID[pid]
			if !ok {
				// pid exited while /proc was read: read its child again.
				if len(path) == 0 || rereads == 3 {
					break
				}
				rereads++
				pid, path = path[len(path)-1], path[:len(path)-1]
				if again, ok := readProcStat(pid); ok {
					byPID[pid] = again
				} else {
					delete(byPID, pid)
				}
				continue
			}
			path = append(path, pid)
			if e.ppid == root {
				in = true
				break
			}
			if e.ppid == 0 { // the top of the pid namespace
				break
			}
			pid = e.ppid
		}
		for _, q := range path {
			ours[q] = in
		}
		if e, ok := byPID[p.pid]; ok && in {
			out = append(out, e)
		}
	}
	return out
}

// killDescendants SIGKILLs every descendant of root until none is left
// alive, or until the deadline. It does not touch root.
//
// A pid read from /proc may be reused before the kill reaches it; callers
// keep root from being reaped while this runs, and inside a sandbox the pid
// space belongs to the sandbox, so the risk is a stray SIGKILL to a process
// of the same sandbox in a window of microseconds.
func killDescendants(root int, timeout time.Duration) error {
	if err := killUntilGone(func() ([]int, error) { return LiveDescendants(root) }, timeout); err != nil {
		return fmt.Errorf("kill processes under pid %d: %w", root, err)
	}
	return nil
}

// killUntilGone SIGKILLs the processes list returns until it returns none,
// or until the deadline: processes may fork while it runs; each round
// catches what the last one missed.
func killUntilGone(list func() ([]int, error), timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := 200 * time.Microsecond
	for {
		pids, err := list()
		if err != nil {
			return fmt.Errorf("list processes: %w", err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still alive after %s", len(pids), timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// signalEach sends sig once to each process list returns. A pid read from
// /proc may be reused before the signal reaches it: see killDescendants.
func signalEach(list func() ([]int, error), sig syscall.Signal) error {
	pids, err := list()
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return nil
}

// noLastPID is set once /proc/sys/kernel/ns_last_pid is found missing.
var noLastPID atomic.Bool

// nothingCreatedSince reports whether no process or thread has been created
// in the agent's pid namespace since pid was (pids are handed out in turn):
// then none of pid's tree can be left once pid is reaped. It reports false
// when it cannot tell (no ns_last_pid without CONFIG_CHECKPOINT_RESTORE,
// nor under gVisor; once found missing it is not looked for again).
func nothingCreatedSince(pid int) bool {
	if noLastPID.Load() {
		return false
	}
	fd, err := syscall.Open("/proc/sys/kernel/ns_last_pid", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			noLastPID.Store(true)
		}
		return false
	}
	var buf [16]byte
	n, err := syscall.Read(fd, buf[:])
	_ = syscall.Close(fd)
	if err != nil || n <= 0 {
		return false
	}
	last, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	return err == nil && last == pid
}
