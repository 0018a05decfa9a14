package agent

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
)

// guardThreads makes sure, before the sandbox's processes run, that they
// cannot keep the Go runtime from making a thread the agent needs by
// holding their process limit (the runtime would end the agent, and the
// sandbox with it): it forks them from a thread in a cgroup of their own,
// below the agent's (cfg.TenantTasks, runc on cgroup v1), or finds the
// agent exempt from their limit (cfg.NprocExempt, gVisor), or else makes
// its threads ahead.
func (s *server) guardThreads(cfg Config) error {
	if cfg.TenantTasks != nil {
		t, err := newForkThread(cfg.TenantTasks)
		if err == nil {
			s.reaper.forkExec = t.forkExec
			return nil
		}
		s.log.Warn("the sandbox's processes cannot have a cgroup of their own; making threads ahead", logError, err)
	}
	if cfg.NprocExempt {
		exempt, err := nprocExempt()
		if err != nil || exempt {
			return err
		}
	}
	reserveThreads(agentv1.Threads)
	return nil
}

// forkThread is a thread of the agent's that has moved into the cgroup
// the sandbox's processes are to be in, and forks each of them: a child
// starts in the cgroup of the thread that forked it (cgroup v1 lets a
// thread have its own). The Go runtime makes no thread from it, locked as
// it is (it asks a thread of its own to), so the agent's threads stay in
// the cgroup above, whose limit leaves them room.
type forkThread struct {
	calls chan func()
}

// newForkThread moves a thread into the cgroup whose tasks file is tasks,
// and closes the file.
func newForkThread(tasks *os.File) (*forkThread, error) {
	defer tasks.Close()
	t := &forkThread{calls: make(chan func())}
	moved := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // for good: the thread is the cgroup's
		// "0" is the thread that writes it.
		if _, err := tasks.WriteString("0"); err != nil {
			moved <- fmt.Errorf("move a thread into the cgroup of the sandbox's processes: %w", err)
			return // the locked thread ends with its goroutine
		}
		moved <- nil
		for call := range t.calls {
			call()
		}
	}()
	if err := <-moved; err != nil {
		return nil, err
	}
	return t, nil
}

// forkExec is the package's forkExec, on the thread.
func (t *forkThread) forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (pid int, err error) {
	done := make(chan struct{})
	t.calls <- func() {
		pid, err = forkExec(argv0, argv, attr)
		close(done)
	}
	<-done
	return pid, err
}

// reserveThreads has the Go runtime make n threads now, while the
// sandbox's pids limit leaves room for them. The runtime keeps a thread it
// no longer needs for later (it never ends an idle one), so the agent's
// blocking system calls find one ready when the sandbox's processes hold
// the limit; making a thread then would fail, and the Go runtime ends its
// process when that happens (agentv1.Threads says more).
//
// Each goroutine locks itself to a thread of its own until all n hold one,
// then lets go of it.
func reserveThreads(n int) {
	var held, release sync.WaitGroup
	held.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	for range n {
		done.Go(func() {
			runtime.LockOSThread()
			held.Done()
			release.Wait()
			runtime.UnlockOSThread()
		})
	}
	held.Wait()
	release.Done()
	done.Wait()
}

// nprocExempt makes the agent (PID 1) exempt from RLIMIT_NPROC, where
// that is the sandbox's process limit (gVisor) and the runtime gave it
// CAP_SYS_RESOURCE: a thread the Go runtime makes then cannot be refused,
// so none need making ahead. A pids cgroup (runc) knows no such exemption.
//
// The runtime hands the capability over in the inheritable set as well
// (an exec as root keeps its permitted set only from the bounding and
// inheritable sets, and the runtime starts the agent by one), so that no
// program the agent starts gets it, every thread of the agent drops it
// from that set first. The agent's process limit holds for them.
func nprocExempt() (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("read the agent's capabilities: %w", err)
	}
	word, bit := unix.CAP_SYS_RESOURCE/32, uint32(1)<<(unix.CAP_SYS_RESOURCE%32)
	if data[word].Inheritable&bit != 0 {
		data[word].Inheritable &^= bit
		// #nosec G103 -- capset(2) takes pointers to its header and data
		_, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET,
			uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
		if errno != 0 {
			return false, fmt.Errorf("drop CAP_SYS_RESOURCE from the inheritable capabilities: %w", errno)
		}
	}
	return data[word].Effective&bit != 0, nil
}
