// Package timerslack sets how late the kernel may fire a thread's timers
// (prctl(2) PR_SET_TIMERSLACK): a sleep or a timeout ends within its
// slack after its time, so that wakeups near each other coalesce.
//
// The daemon runs with Daemon, and so do the processes it starts and
// theirs, which inherit it: runc, runc's init and the agent (and the host
// tools it runs). Each of the three is a Go program whose runtime wakes a
// monitor thread (sysmon) every 20 µs while it is busy; with the kernel's
// default 50 µs of slack that is thousands of wakeups a second under a
// stream of creates, each a context switch, which a virtual machine makes
// dear. With 1 ms they are ~3.5× fewer, and a create → exec → delete
// costs ~14% less CPU. What they time (timeouts, polls of a few
// milliseconds) needs nothing finer.
//
// A sandbox's own processes keep the kernel's default (With, Default): a
// tenant's short sleep must last as it would anywhere. So do gVisor's
// processes, whose kernel keeps the sandbox's time with host timers.
package timerslack

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// Default is the kernel's timer slack for a thread of normal priority.
	Default = 50_000 // ns
	// Daemon is the daemon's, and its runtime's.
	Daemon = 1_000_000 // ns
)

// SetProcess sets the slack of every thread of this process to ns; the
// threads made later inherit it from the thread that makes them. Setting
// another thread's slack needs CAP_SYS_NICE, which root has.
func SetProcess(ns uint64) error {
	v := []byte(strconv.FormatUint(ns, 10))
	done := map[string]bool{}
	// Again until no thread is new: one may be made meanwhile by a thread
	// not yet set.
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list the daemon's threads: %w", err)
		}
		fresh := false
		for _, t := range tasks {
			if done[t.Name()] {
				continue
			}
			// The per-thread file is /proc/TID's: /proc/self/task/TID
			// has none.
			err := os.WriteFile("/proc/"+t.Name()+"/timerslack_ns", v, 0)
			if err != nil && !errors.Is(err, os.ErrNotExist) { // a thread that ended meanwhile
				return fmt.Errorf("set the timer slack of thread %s: %w", t.Name(), err)
			}
			done[t.Name()], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}

// With runs fn on a thread whose slack is ns meanwhile, and puts the
// thread's own back after: a process fn forks starts with ns. Where the
// slack cannot be set (a kernel that refuses the call), fn runs anyway.
func With(ns uint64, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || old < 0 || uint64(old) == ns {
		return fn()
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(ns), 0, 0, 0); err != nil {
		return fn()
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0) }() // #nosec G115 -- as read
	return fn()
}

// Of returns thread tid's slack (of a process: its main thread's).
func Of(tid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/timerslack_ns")
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
