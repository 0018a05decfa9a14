package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/timerslack"
)

// reaper starts the agent's children and, when the agent is PID 1 (or a
// child subreaper in tests), reaps the orphans the kernel re-parents to it.
//
// How reaping avoids stealing exit statuses: the agent's own children are
// its shims and the command in its direct slot (see directSlot), all started
// through spawn, which records their pids; each is reaped by whoever owns
// it, with wait4 on its pid (shimPool.reap, directRun.reapMain). The orphan
// reaper never calls wait4(-1): on SIGCHLD, when waitid(WNOWAIT) shows a
// zombie child, it reads /proc for zombies whose parent is the agent, then,
// holding mu exclusively, reaps with wait4(pid, WNOHANG) only those that are
// not recorded. spawn holds mu shared from before fork until the pid is
// recorded, so a child is never seen by the reaper, nor by directTree, as an
// unrecorded one.
//
// Orphans are those of the direct command: what it left behind is
// re-parented to the agent, since processes under a shim are re-parented to
// their shim (a child subreaper). The agent also inherits the orphans of
// processes it did not start (runc exec) and of a shim that died; those
// count as part of the direct tree.
type reaper struct {
	mu   sync.RWMutex // shared: spawning; exclusive: reaping orphans, reading the direct tree
	log  *slog.Logger
	self int
	kick chan struct{} // wake makes run do a round
	// forkExec starts every child: forkExec, or a forkThread's,
	// set before the first spawn.
	forkExec func(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error)

	kidsMu sync.Mutex
	kids   map[int]bool // children not yet reaped by their waiter → whether a shim
}

func newReaper(log *slog.Logger) *reaper {
	return &reaper{log: log, self: os.Getpid(), kick: make(chan struct{}, 1), kids: map[int]bool{}, forkExec: forkExec}
}

// forkExec is syscall.ForkExec giving the child the kernel's timer slack:
// the agent has the daemon's coarser one (see timerslack), but a sandbox's
// processes sleep as they would anywhere.
func forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (pid int, err error) {
	err = timerslack.With(timerslack.Default, func() error {
		pid, err = syscall.ForkExec(argv0, argv, attr)
		return err
	})
	return pid, err
}

// forkWait bounds how long a fork refused with EAGAIN is tried again: the
// sandbox is at its process limit (pids), most often for a moment, until
// the processes of a tree just killed are reaped (a fork bomb's zombies
// count until then).
const forkWait = 2 * time.Second

// retryFork calls fork until it succeeds, fails otherwise than with
// EAGAIN, or forkWait has passed; between tries it calls between (when not
// nil) and pauses, 5 ms at first, up to 100 ms.
func retryFork(fork func() (int, error), between func()) (int, error) {
	deadline := time.Now().Add(forkWait)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		pid, err := fork()
		if !errors.Is(err, syscall.EAGAIN) || time.Now().Add(pause).After(deadline) {
			return pid, err
		}
		if between != nil {
			between()
		}
		time.Sleep(pause)
	}
}

// spawn fork-execs a child the caller will wait for by pid, then forget.
// shim tells a shim (whose processes are not the direct tree's) from the
// direct command. A fork refused for want of processes is tried again
// (retryFork), with a round of the reaper between tries: it reaps only
// while no spawn is under way.
func (r *reaper) spawn(argv0 string, argv []string, attr *syscall.ProcAttr, shim bool) (int, error) {
	return retryFork(func() (int, error) { return r.spawnOnce(argv0, argv, attr, shim) }, r.wake)
}

func (r *reaper) spawnOnce(argv0 string, argv []string, attr *syscall.ProcAttr, shim bool) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	pid, err := r.forkExec(argv0, argv, attr)
	if err != nil {
		return 0, err
	}
	r.kidsMu.Lock()
	r.kids[pid] = shim
	r.kidsMu.Unlock()
	return pid, nil
}

// spawnError is the Connect error of a command spawn could not start, with
// code for all but EAGAIN: no process could be made, the sandbox's limit
// (or the host's) is reached; the caller can act on that.
func spawnError(code connect.Code, err error) error {
	if errors.Is(err, syscall.EAGAIN) {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w: the sandbox is at its process limit; end some of its processes, or give it a higher pids limit", err))
	}
	return connect.NewError(code, err)
}

// forget drops a child its waiter has reaped.
func (r *reaper) forget(pid int) {
	r.kidsMu.Lock()
	delete(r.kids, pid)
	r.kidsMu.Unlock()
}

func (r *reaper) known(pid int) bool {
	r.kidsMu.Lock()
	defer r.kidsMu.Unlock()
	_, ok := r.kids[pid]
	return ok
}

// run calls round, which reaps orphans (reapOrphans and what else the
// caller reaps by pid), at once, on every SIGCHLD and on wake until ctx is
// done.
func (r *reaper) run(ctx context.Context, round func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		round()
		select {
		case <-sigs:
		case <-r.kick:
		case <-ctx.Done():
			return
		}
	}
}

// wake makes run do a round soon, even without a SIGCHLD.
func (r *reaper) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// reapOrphans reaps the zombie children nobody waits for by pid, and
// reports how many it reaped.
func (r *reaper) reapOrphans() int {
	// Most SIGCHLDs are those of children whose waiters reap them (the
	// direct command, a shim): when no zombie child is left, one waitid
	// tells so without reading /proc.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil || info.Signo == 0 {
		return 0
	}
	procs, err := scanProcs()
	if err != nil {
		r.log.Warn("reap orphans: list processes", logError, err)
		return 0
	}
	var zombies []int
	for _, p := range procs {
		if p.ppid == r.self && p.state == 'Z' {
			zombies = append(zombies, p.pid)
		}
	}
	if len(zombies) == 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reaped := 0
	for _, pid := range zombies {
		if r.known(pid) {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			r.log.Debug("reaped orphan", logPID, pid, logStatus, int(ws))
			reaped++
		}
	}
	return reaped
}

// aloneInNamespace reports whether the agent is the only process of its
// pid namespace, zombies included, in one system call: kill(-1, 0) checks
// every process but init and the caller, and fails with ESRCH when there
// is none. Only as that namespace's init (PID 1): elsewhere (tests), -1
// means every process of the host.
func (r *reaper) aloneInNamespace() bool {
	return r.self == 1 && errors.Is(unix.Kill(-1, 0), unix.ESRCH)
}

// onlyShimsLeft reports whether /proc shows no process but the agent and
// its shims, in two listings one after the other: then nothing is left of
// the direct tree. It is directTree's answer for the common case at the cost
// of listing /proc, without reading each process's stat. It holds r.mu as
// directTree does, and lists twice for the same reason.
func (r *reaper) onlyShimsLeft() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range 2 {
		pids, err := listPIDs()
		if err != nil {
			return false
		}
		r.kidsMu.Lock()
		only := onlyAgentAndShims(pids, r.self, r.kids)
		r.kidsMu.Unlock()
		if !only {
			return false
		}
	}
	return true
}

// onlyAgentAndShims reports whether every pid is the agent's (self) or a
// shim's (kids maps the agent's children to whether each is a shim).
func onlyAgentAndShims(pids []int, self int, kids map[int]bool) bool {
	return !slices.ContainsFunc(pids, func(pid int) bool { return pid != self && !kids[pid] })
}

// directTree lists the processes of the direct command's tree, zombies
// included: every process whose chain of parents reaches the agent without
// passing through a shim (see directSlot).
//
// Spawns and reaping wait meanwhile: a shim between fork and exec, not
// recorded yet, is not taken for part of the tree, and a process of the tree
// that is the agent's child and exits meanwhile stays a zombie, so it is
// seen. /proc is listed a second time after it is read: what a process of
// the tree forked before exiting while /proc was read is new in the second
// list, so an empty result means the tree is empty.
func (r *reaper) directTree() ([]procEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	procs, err := scanProcs()
	if err != nil {
		return nil, err
	}
	again, err := listPIDs()
	if err != nil {
		return nil, err
	}
	seen := make(map[int]bool, len(procs))
	for _, p := range procs {
		seen[p.pid] = true
	}
	for _, pid := range again {
		if !seen[pid] {
			if e, ok := readProcStat(pid); ok {
				procs = append(procs, e)
			}
		}
	}
	r.kidsMu.Lock()
	shims := make(map[int]bool, len(r.kids))
	for pid, shim := range r.kids {
		if shim {
			shims[pid] = true
		}
	}
	r.kidsMu.Unlock()
	return treeOf(procs, r.self, func(pid int) bool { return shims[pid] }), nil
}
