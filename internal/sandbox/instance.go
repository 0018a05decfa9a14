package sandbox

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/store"
)

// instance is a sandbox with a running container: its agent connection and
// what the idle timer needs.
type instance struct {
	id          string
	idleTimeout time.Duration
	// env is the sandbox's environment, under each command's own. It may
	// hold secrets: never log it.
	env     map[string]string
	agent   *agentclient.Client
	backend backend.Backend
	handle  backend.Handle

	mu         sync.Mutex
	paused     bool // frozen: calls thaw it first
	lastActive time.Time
	running    int               // execs in flight
	limitHits  backend.LimitHits // limit hits already put down to a command
	// The last CPU sample (see sampleCPU), and the share of a CPU used
	// between it and the one before.
	cpuAt    time.Time
	cpuTime  time.Duration
	cpuShare float64
}

func newInstance(rec *store.Sandbox, be backend.Backend, h backend.Handle) *instance {
	dial := func(ctx context.Context) (net.Conn, error) { return be.DialAgent(ctx, h) }
	return &instance{
		id:          rec.ID,
		idleTimeout: rec.IdleTimeout,
		env:         rec.Env,
		agent:       agentclient.New(dial),
		backend:     be,
		handle:      h,
		lastActive:  time.Now(),
	}
}

// touch records activity now.
func (i *instance) touch() {
	i.mu.Lock()
	i.lastActive = time.Now()
	i.mu.Unlock()
}

// begin and end bracket a command: a sandbox running one is never idle.
func (i *instance) begin() {
	i.mu.Lock()
	i.running++
	i.lastActive = time.Now()
	i.mu.Unlock()
}

func (i *instance) end() {
	i.mu.Lock()
	i.running--
	i.lastActive = time.Now()
	i.mu.Unlock()
}

// idle reports whether the sandbox has been idle past its timeout.
func (i *instance) idle(now time.Time) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.running == 0 && now.Sub(i.lastActive) >= i.idleTimeout
}

// close drops the agent's idle connections.
func (i *instance) close() { i.agent.CloseIdleConnections() }

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
