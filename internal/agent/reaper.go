package agent

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// reaper starts the agent's children and, when the agent is PID 1, reaps the
// orphans the kernel re-parents to it.
//
// How reaping avoids stealing exit statuses: the agent's only own children
// are shims, started through spawn, which records their pids; a shim that
// exits is reaped by whoever owns it, with wait4 on its pid (shimPool.reap).
// The orphan reaper never calls wait4(-1): on SIGCHLD it reads /proc for
// zombies whose parent is the agent, then, holding mu exclusively, reaps with
// wait4(pid, WNOHANG) only those that are not recorded shims. spawn holds mu
// shared from before fork until the pid is recorded, so a shim is never seen
// by the reaper as an unrecorded child. Orphans are rare anyway: user
// processes are re-parented to their shim (a child subreaper), not to the
// agent; the agent only inherits orphans from processes it did not start
// (runc exec) or from a shim that died.
type reaper struct {
	mu  sync.RWMutex // shared: spawning; exclusive: reaping orphans
	log *slog.Logger

	kidsMu sync.Mutex
	kids   map[int]struct{} // shims not yet reaped by their waiter
}

func newReaper(log *slog.Logger) *reaper {
	return &reaper{log: log, kids: map[int]struct{}{}}
}

// spawn fork-execs a child the caller will wait for by pid, then forget.
func (r *reaper) spawn(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	pid, err := syscall.ForkExec(argv0, argv, attr)
	if err != nil {
		return 0, err
	}
	r.kidsMu.Lock()
	r.kids[pid] = struct{}{}
	r.kidsMu.Unlock()
	return pid, nil
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

// run reaps orphans until ctx is done.
func (r *reaper) run(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		r.reapOrphans()
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
	}
}

func (r *reaper) reapOrphans() {
	procs, err := scanProcs()
	if err != nil {
		r.log.Warn("reap orphans: list processes", logError, err)
		return
	}
	self := os.Getpid()
	var zombies []int
	for _, p := range procs {
		if p.ppid == self && p.state == 'Z' {
			zombies = append(zombies, p.pid)
		}
	}
	if len(zombies) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pid := range zombies {
		if r.known(pid) {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			r.log.Debug("reaped orphan", logPID, pid, logStatus, int(ws))
		}
	}
}
