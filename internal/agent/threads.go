package agent

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
