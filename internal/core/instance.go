package core

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// instance is a sandbox with a running container: its agent connection and
// what the idle timer needs.
type instance struct {
	id          string
	idleTimeout time.Duration
	// env is the sandbox's environment, under each command's own. It may
	// hold secrets: never log it.
	env map[string]string
	// owner is whose it is: its commands' secrets are its owner's (see
	// commandEnv).
	owner   owner
	agent   *agentclient.Client
	backend backend.Backend
	handle  backend.Handle

	mu        sync.Mutex
	stopWatch func() // ends the backend's watch of its container
	// onEnd is told how its container ended by itself, while watched (see
	// Manager.watch); endedAs keeps it while onEnd is nil, a pool's
	// sandbox being handed over, until one is set.
	onEnd      func(reason string)
	endedAs    string
	stops      []func() // end what its Starter hooks started (see stopHooks)
	paused     bool     // frozen: calls thaw it first
	closing    bool     // being halted or deleted: no new calls
	lastActive time.Time
	running    int               // calls in flight (see hold)
	limitHits  backend.LimitHits // limit hits already put down to a command
	// The last CPU sample (see sampleCPU), and the share of a CPU used
	// between it and the one before.
	cpuAt    time.Time
	cpuTime  time.Duration
	cpuShare float64
}

// owner is whose a sandbox is: its workspace's, made for user, its
// secrets narrowed to names (nil: all of them).
type owner struct {
	workspace string
	user      string
	names     []string
}

func ownerOf(rec *store.Sandbox) owner {
	return owner{workspace: rec.Workspace, user: rec.User, names: slices.Clone(rec.Secrets)}
}

func newInstance(rec *store.Sandbox, be backend.Backend, h backend.Handle, clock Clock) *instance {
	dial := func(ctx context.Context) (net.Conn, error) { return be.DialAgent(ctx, h) }
	return &instance{
		id:          rec.ID,
		idleTimeout: rec.IdleTimeout,
		env:         rec.Env,
		owner:       ownerOf(rec),
		agent:       agentclient.New(dial),
		backend:     be,
		handle:      h,
		lastActive:  clock.Now(),
	}
}

// touch records activity at now.
func (i *instance) touch(now time.Time) {
	i.mu.Lock()
	i.lastActive = now
	i.mu.Unlock()
}

// hold counts a call in flight, unless the instance is closing: a sandbox
// with one is never idle, and is not suspended or stopped under it.
func (i *instance) hold(now time.Time) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closing {
		return false
	}
	i.running++
	i.lastActive = now
	return true
}

// release ends what hold began.
func (i *instance) release(now time.Time) {
	i.mu.Lock()
	i.running--
	i.lastActive = now
	i.mu.Unlock()
}

// close marks the instance closing and drops the agent's idle
// connections, and reports whether it did: unless force, not while calls
// are in flight.
func (i *instance) close(force bool) bool {
	i.mu.Lock()
	if i.running > 0 && !force {
		i.mu.Unlock()
		return false
	}
	i.closing = true
	i.mu.Unlock()
	i.agent.CloseIdleConnections()
	return true
}

// idle reports whether the sandbox has been idle past its timeout.
func (i *instance) idle(now time.Time) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.running == 0 && now.Sub(i.lastActive) >= i.idleTimeout
}

func (i *instance) isPaused() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.paused
}

func (i *instance) setPaused(p bool) {
	i.mu.Lock()
	i.paused = p
	i.mu.Unlock()
}

// reopen undoes close when what closed it did not go ahead.
func (i *instance) reopen() {
	i.mu.Lock()
	i.closing = false
	i.mu.Unlock()
}

// setUnwatch keeps what ends the watch of the instance's container.
func (i *instance) setUnwatch(stop func()) {
	i.mu.Lock()
	i.stopWatch = stop
	i.mu.Unlock()
}

// whenEnded sets what is told when the instance's container ends by
// itself (nil: nobody yet), and reports whether it is watched already. An
// end that came while nobody was told is told now, on a goroutine of its
// own: the caller may hold the sandbox's lock, which the telling takes.
func (i *instance) whenEnded(f func(reason string)) (watched bool) {
	i.mu.Lock()
	i.onEnd = f
	reason := i.endedAs
	if f != nil {
		i.endedAs = ""
	}
	watched = i.stopWatch != nil
	i.mu.Unlock()
	if f != nil && reason != "" {
		go f(reason)
	}
	return watched
}

// containerEnded is the backend's word that the instance's container
// ended by itself.
func (i *instance) containerEnded(reason string) {
	i.mu.Lock()
	f := i.onEnd
	if f == nil {
		i.endedAs = reason
	}
	i.mu.Unlock()
	if f != nil {
		f(reason)
	}
}

// addStop keeps what ends what a Starter hook started for the instance.
func (i *instance) addStop(stop func()) {
	if stop == nil {
		return
	}
	i.mu.Lock()
	i.stops = append(i.stops, stop)
	i.mu.Unlock()
}

// stopHooks ends what the Starter hooks started for the instance (the
// serving of its network: its connections end, and its router namespace
// has no listener until the sandbox runs again), the last started first.
func (i *instance) stopHooks() {
	i.mu.Lock()
	stops := i.stops
	i.stops = nil
	i.mu.Unlock()
	for _, stop := range slices.Backward(stops) {
		stop()
	}
}

// unwatch ends the watch of the instance's container, if any.
func (i *instance) unwatch() {
	i.mu.Lock()
	stop := i.stopWatch
	i.stopWatch = nil
	i.mu.Unlock()
	if stop != nil {
		stop()
	}
}
