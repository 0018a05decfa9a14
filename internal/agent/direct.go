package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
)

// directSlot lets the agent supervise one command tree itself, as a shim
// would, with no shim in between: a command started while the slot is free
// runs as the agent's own child; while its tree has any process left, the
// slot is taken and other commands run under shims.
//
// Why: a command in the slot neither waits for a spare shim (the first
// command of a sandbox would otherwise wait for one to start, milliseconds
// of exec and page faults) nor pays the hop through the shim
// protocol.
//
// Why it is sound: every shim is a child subreaper, so the orphans the
// kernel re-parents to the agent are those of the command in the slot (and
// the rare ones reaper's comment lists). The slot's tree is therefore every
// process whose chain of parents reaches the agent without passing through a
// shim (reaper.directTree): the command, what it forked, and what it left
// behind, setsid'd and double-forked processes included. Killing the command
// SIGKILLs that set until it is empty, as a shim kills its descendants.
//
// Who reaps what: on SIGCHLD, the reaper's goroutine reaps the main process
// by pid, the one discipline for the agent's own children (see reaper), then
// the orphans; then it checks whether the tree is gone: none of it is left
// in /proc (reaper.directTree). The check runs when the main process is
// reaped and after each round that reaped orphans (the last process of the
// tree is the agent's child, so its end is such a round).
//
// The slot is only enabled where orphans do come to the agent and are
// reaped: when it is PID 1, or a child subreaper reaping orphans (tests).
type directSlot struct {
	srv *server

	mu      sync.Mutex
	enabled bool
	cur     *directRun // nil while the slot is free
}

// directRun is the command in the direct slot.
type directRun struct {
	slot *directSlot
	pid  int // 0 until the fork returns; guarded by slot.mu

	// Only the reaper's goroutine (round) sets these, ws and ok before it
	// closes exited.
	reaped bool // the main process is reaped: the tree may empty
	ws     syscall.WaitStatus
	ok     bool          // ws was read
	exited chan struct{} // closed once the main process is reaped
	isGone bool
	gone   chan struct{} // closed once the whole tree is gone

	killing  atomic.Bool   // kill has begun: the tree is on its way out
	released chan struct{} // closed when the run gives the slot back
}

var _ supervisor = (*directRun)(nil)

// unignoreCommandSignals makes the signals SendSignal sends handled, and
// dropped, where the agent's process ignores them (started under nohup, or
// as a shell's background job: SIGHUP, SIGINT, SIGQUIT), until the
// returned stop. A command in the direct slot is the agent's own child and
// would start ignoring them too (exec keeps SIG_IGN, and a shell cannot
// even trap a signal ignored on entry); handled, they start at their
// defaults, as under a shim, which handles them for that reason. The
// kernel's word (SigIgn in /proc/self/status) is taken, not the Go
// runtime's.
func unignoreCommandSignals() (stop func()) {
	var ignored []os.Signal
	mask := ignoredSignals()
	for _, sig := range mainSignals {
		if mask&(1<<(sig-1)) != 0 {
			ignored = append(ignored, sig)
		}
	}
	if len(ignored) == 0 {
		return func() {}
	}
	drop := make(chan os.Signal, 1)
	signal.Notify(drop, ignored...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-drop:
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(drop)
		close(done)
	}
}

// ignoredSignals is the process's SigIgn mask (bit n-1 for signal n); 0
// when it cannot be read.
func ignoredSignals() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, _ := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return mask
		}
	}
	return 0
}

func (d *directSlot) setEnabled(on bool) {
	d.mu.Lock()
	d.enabled = on
	d.mu.Unlock()
}

// run starts a command in the slot, with stdio as its fds 0, 1 and 2, when
// the slot is free. A nil supervisor and a nil error mean it is not: the
// caller runs the command under a shim.
func (d *directSlot) run(req shimRequest, stdio [3]*os.File) (supervisor, uint32, error) {
	d.mu.Lock()
	if cur := d.cur; d.enabled && cur != nil && cur.killing.Load() {
		// A tree being killed (a timeout, a kill) leaves the slot in a
		// moment, and its processes leave the sandbox's process limit: a
		// command started meanwhile waits for that rather than take a
		// shim, a process more, which the limit (full after a fork bomb)
		// may refuse.
		d.mu.Unlock()
		t := time.NewTimer(killTimeout)
		select {
		case <-cur.released:
		case <-t.C:
		}
		t.Stop()
		d.mu.Lock()
	}
	if !d.enabled || d.cur != nil {
		d.mu.Unlock()
		return nil, 0, nil
	}
	r := &directRun{slot: d, exited: make(chan struct{}), gone: make(chan struct{}), released: make(chan struct{})}
	d.cur = r
	d.mu.Unlock()

	// Fd puts the files in blocking mode: the command's stdio must block.
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	pid, err := req.start(fds, func(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
		pid, err := d.srv.reaper.spawn(argv0, argv, attr, false)
		if err == nil {
			d.mu.Lock()
			r.pid = pid
			d.mu.Unlock()
		}
		return pid, err
	})
	if err != nil {
		r.release()
		return nil, 0, spawnError(connect.CodeInvalidArgument, err)
	}
	// Its SIGCHLD may have come before round could know its pid.
	d.srv.reaper.wake()
	d.srv.shims.primeUnless(r.gone)
	// #nosec G115 -- a pid is positive and at most pid_max (2^22)
	return r, uint32(pid), nil
}

// round is one round of the reaper (on SIGCHLD): it reaps the main process
// once it has exited, then the orphans, then checks whether the tree is
// gone. Doing all three in the reaper's goroutine keeps the order simple:
// whatever reaps the last process of the tree, the check comes after.
func (d *directSlot) round() {
	d.mu.Lock()
	r := d.cur
	pid := 0
	if r != nil {
		pid = r.pid
	}
	d.mu.Unlock()
	justReaped := false
	if pid > 0 && !r.reaped {
		justReaped = r.reapMain(pid)
	}
	orphans := d.srv.reaper.reapOrphans()
	if r == nil || !r.reaped || r.isGone {
		return
	}
	switch {
	case justReaped && (d.srv.reaper.aloneInNamespace() || nothingCreatedSince(pid) || d.srv.reaper.onlyShimsLeft()):
		// The common case: the agent alone in its pid namespace (one
		// system call), else nothing created since (ns_last_pid: a read),
		// else a listing of /proc but no process's stat (gVisor has no
		// ns_last_pid; with shims about, kill(-1, 0) finds them).
		r.markGone()
	case justReaped || orphans > 0:
		r.checkGone()
	}
	if justReaped {
		close(r.exited)
	}
}

// reapMain reaps the main process if it has exited, by pid, and reports
// whether it did.
func (r *directRun) reapMain(pid int) bool {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	if got == 0 || errors.Is(err, syscall.EINTR) {
		return false // still runs
	}
	r.slot.srv.reaper.forget(pid)
	if err != nil {
		r.slot.srv.log.Warn("wait for command", logPID, pid, logError, err)
	}
	r.reaped, r.ws, r.ok = true, ws, err == nil
	return true
}

// checkGone closes gone if nothing of the tree is left. Zombies count as
// left: the reaper's next round reaps them and checks again.
func (r *directRun) checkGone() {
	tree, err := r.slot.srv.reaper.directTree()
	if err != nil {
		r.slot.srv.log.Warn("list the direct tree", logError, err)
		return
	}
	if len(tree) == 0 {
		r.markGone()
	}
}

func (r *directRun) markGone() {
	r.isGone = true
	close(r.gone)
}

func (r *directRun) waitExit() (ws syscall.WaitStatus, ok, gone bool) {
	<-r.exited
	select {
	case <-r.gone:
		gone = true
	default:
	}
	return r.ws, r.ok, gone
}

func (r *directRun) waitGone() { <-r.gone }

func (r *directRun) kill() error {
	r.killing.Store(true)
	if err := killUntilGone(r.live, killTimeout); err != nil {
		return fmt.Errorf("kill the direct tree: %w", err)
	}
	return nil
}

func (r *directRun) signal(sig syscall.Signal) error {
	if err := signalEach(r.live, sig); err != nil {
		return fmt.Errorf("signal the direct tree: %w", err)
	}
	return nil
}

// live lists the processes of the tree that are not dead already.
func (r *directRun) live() ([]int, error) {
	tree, err := r.slot.srv.reaper.directTree()
	live := make([]int, 0, len(tree))
	for _, p := range tree {
		if p.state != 'Z' { // dead already; its children are re-parented
			live = append(live, p.pid)
		}
	}
	return live, err
}

// release frees the slot.
func (r *directRun) release() {
	d := r.slot
	d.mu.Lock()
	if d.cur == r {
		d.cur = nil
		close(r.released)
	}
	d.mu.Unlock()
}

func (r *directRun) LogValue() slog.Value { return slog.StringValue("direct") }
