// Package memory keeps a sandbox near its memory limit alive: a hook of
// the lifecycle kernel. Where the backend watches a sandbox's memory
// (backend.MemoryWatcher: gVisor, whose sandbox the host's OOM killer
// would end whole), the hook has the sandbox's agent kill the process
// inside that holds the most memory each time the backend says the
// sandbox is near its limit, as a kernel's OOM killer would
// (hook.Starter), and counts the kills where the backend's LimitHits
// cannot, so that the command that ran is put down to the memory limit
// (hook.Counter).
package memory

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Reclaimer is the hook. It is safe for concurrent use.
type Reclaimer struct {
	log *slog.Logger
	// kill has l's agent kill its biggest process (tests change it).
	kill func(ctx context.Context, l hook.Live) (agentclient.Reclaimed, error)

	mu   sync.Mutex
	runs map[string]*run // by sandbox, while its container runs
}

// run is what the hook keeps of one run of a sandbox's container.
type run struct {
	// killing is held while a process is being killed; kills counts them.
	killing sync.Mutex
	kills   int64 // under killing
}

// New returns the hook; log may be nil.
func New(log *slog.Logger) *Reclaimer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kill := func(ctx context.Context, l hook.Live) (agentclient.Reclaimed, error) {
		return l.Agent.ReclaimMemory(ctx)
	}
	return &Reclaimer{log: log, kill: kill, runs: map[string]*run{}}
}

// Name names the hook.
func (r *Reclaimer) Name() string { return "memory" }

const attrSandbox = "sandbox_id"

// Start watches the memory of l's container while it runs, when its
// backend can (hook.Starter).
func (r *Reclaimer) Start(_ context.Context, l hook.Live) (stop func(), err error) {
	w := l.Backend.Capabilities().WatchMemory
	if w == nil {
		return nil, nil
	}
	one := &run{}
	ctx, cancel := context.WithCancel(context.Background())
	err = w.WatchMemory(ctx, l.Handle, func() { r.reclaim(l, one) })
	if err != nil {
		cancel()
		if !errors.Is(err, errdefs.ErrNotImplemented) {
			r.log.Warn("sandbox's memory not watched: past its limit, the host's OOM killer may end it whole", attrSandbox, l.ID, "error", err)
		}
		return nil, nil
	}
	r.mu.Lock()
	r.runs[l.ID] = one
	r.mu.Unlock()
	return func() {
		cancel()
		r.mu.Lock()
		if r.runs[l.ID] == one {
			delete(r.runs, l.ID)
		}
		r.mu.Unlock()
	}, nil
}

// reclaim has the agent of a sandbox near its memory limit kill the
// process that holds the most memory, one at a time.
func (r *Reclaimer) reclaim(l hook.Live, one *run) {
	if !one.killing.TryLock() {
		return // one is under way
	}
	defer one.killing.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := r.kill(ctx, l)
	switch {
	case err != nil:
		r.log.Warn("sandbox near its memory limit: no process killed", attrSandbox, l.ID, "error", err)
	case v.Pid != 0:
		one.kills++
		r.log.Info("process killed: its sandbox was out of memory", attrSandbox, l.ID,
			"pid", v.Pid, "name", v.Name, "rss_bytes", v.RSSBytes)
	}
}

// CountHits adds the processes killed in sandbox id's running container
// to its OOM kills, once a kill under way has ended: a command's end can
// come back before the agent's answer does (hook.Counter).
func (r *Reclaimer) CountHits(id string, hits *backend.LimitHits) {
	r.mu.Lock()
	one := r.runs[id]
	r.mu.Unlock()
	if one == nil {
		return
	}
	one.killing.Lock()
	hits.OOMKills += one.kills
	one.killing.Unlock()
}
