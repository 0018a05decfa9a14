package agent

import (
	"runtime"
	"sync"
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
