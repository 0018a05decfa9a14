// Package processes starts and lists a sandbox's background processes
// (commands started through the API that outlive the request: a dev
// server, a worker), and keeps them across its suspends and stops: a hook
// of the lifecycle kernel (hook.Suspender, hook.Resumer). Before a
// suspend it records which of them run; once the sandbox runs again it
// starts again those that ran and do not (a restored memory checkpoint
// keeps them running). One that runs and is not a service keeps its
// sandbox awake (hook.Busier).
package processes

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Store is where the processes' records are: how to start each, and
// whether it ran.
type Store interface {
	ListProcesses(ctx context.Context, sandboxID string) ([]*store.Process, error)
	PutProcess(ctx context.Context, p *store.Process) error
}

// Keeper is the hook. It is safe for concurrent use.
type Keeper struct {
	store  Store
	log    *slog.Logger
	kernel hook.Kernel
	// start and running are Start and Running (tests change them).
	start   func(ctx context.Context, sb hook.Sandbox, p *store.Process) (uint32, error)
	running func(ctx context.Context, sb hook.Sandbox) (map[string]uint32, error)
}

// New returns the hook; log may be nil.
func New(st Store, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{store: st, log: log, start: Start, running: Running}
}

// Attach takes the kernel, to look at live sandboxes (hook.Attacher).
func (k *Keeper) Attach(kernel hook.Kernel) { k.kernel = kernel }

// Live is which background processes run in sandbox id, their pids by
// name, looked at without waking it nor counting as activity: nil when
// none can run because it is not live (suspended, stopped, failed) or is
// paused, its processes frozen with it.
func (k *Keeper) Live(ctx context.Context, id string) (map[string]uint32, error) {
	sb, ok := k.kernel.Peek(id)
	if !ok {
		return nil, nil
	}
	return k.running(ctx, sb)
}

// Busy names the background processes that run in sb and are not
// services (hook.Busier). A service is not activity by running: the
// requests to its preview are, and one that comes after a suspend wakes
// the sandbox and starts the service again.
func (k *Keeper) Busy(ctx context.Context, sb hook.Sandbox) ([]string, error) {
	running, err := k.running(ctx, sb)
	if err != nil {
		return nil, fmt.Errorf("background processes unknown: %w", err)
	}
	if len(running) == 0 {
		return nil, nil
	}
	known, err := k.store.ListProcesses(ctx, sb.ID())
	if err != nil {
		return nil, fmt.Errorf("background processes unknown: %w", err)
	}
	var busy []string
	for _, name := range slices.Sorted(maps.Keys(running)) {
		if !slices.ContainsFunc(known, func(p *store.Process) bool { return p.Name == name && p.Port > 0 }) {
			busy = append(busy, fmt.Sprintf("background process %q (pid %d) running", name, running[name]))
		}
	}
	return busy, nil
}

// Name names the hook.
func (k *Keeper) Name() string { return "processes" }

const attrSandbox = "sandbox_id"

// Suspending records which background processes run, before a suspend or
// stop ends them: those a resume starts again. When the agent cannot say,
// the records stay as they were (hook.Suspender).
func (k *Keeper) Suspending(ctx context.Context, sb hook.Sandbox) {
	known, err := k.store.ListProcesses(ctx, sb.ID())
	if err != nil || len(known) == 0 {
		return
	}
	running, err := k.running(ctx, sb)
	if err != nil {
		k.log.Warn("list processes before suspend", attrSandbox, sb.ID(), "error", err)
		return
	}
	for _, p := range known {
		if _, ok := running[p.Name]; ok != p.Running {
			p.Running = ok
			if err := k.store.PutProcess(ctx, p); err != nil {
				k.log.Warn("record process", attrSandbox, sb.ID(), "process", p.Name, "error", err)
			}
		}
	}
}

// Resumed starts again the background processes that ran when the
// sandbox was suspended and do not run now (hook.Resumer).
func (k *Keeper) Resumed(ctx context.Context, sb hook.Sandbox) { k.Restart(ctx, sb) }

// Restart starts the stored background processes that should run and do
// not: after a resume, and in a fork. One that fails to start is logged
// and marked not running; the sandbox is up regardless.
func (k *Keeper) Restart(ctx context.Context, sb hook.Sandbox) {
	known, err := k.store.ListProcesses(ctx, sb.ID())
	if err != nil || len(known) == 0 {
		if err != nil {
			k.log.Error("list processes to restart", attrSandbox, sb.ID(), "error", err)
		}
		return
	}
	running, err := k.running(ctx, sb)
	if err != nil {
		k.log.Error("list running processes after resume", attrSandbox, sb.ID(), "error", err)
		return
	}
	for _, p := range known {
		if _, ok := running[p.Name]; ok || !p.Running {
			continue
		}
		pid, err := k.start(ctx, sb, p)
		if err != nil {
			k.log.Warn("restart process after resume", attrSandbox, sb.ID(), "process", p.Name, "error", err)
			p.Running = false
			if err := k.store.PutProcess(ctx, p); err != nil {
				k.log.Warn("record process", attrSandbox, sb.ID(), "process", p.Name, "error", err)
			}
			continue
		}
		k.log.Info("process restarted after resume", attrSandbox, sb.ID(), "process", p.Name, "pid", pid)
	}
}
