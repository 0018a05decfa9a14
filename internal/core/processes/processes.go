// Package processes keeps a sandbox's background processes (commands
// started through the API that outlive the request: a dev server, a
// worker) across its suspends and stops: a hook of the lifecycle kernel
// (hook.Suspender, hook.Resumer). Before a suspend it records which of
// them run; once the sandbox runs again it starts again those that ran
// and do not (a restored memory checkpoint keeps them running).
package processes

import (
	"context"
	"log/slog"

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
	store Store
	log   *slog.Logger
}

// New returns the hook; log may be nil.
func New(st Store, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{store: st, log: log}
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
	running, err := sb.Processes(ctx)
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
	running, err := sb.Processes(ctx)
	if err != nil {
		k.log.Error("list running processes after resume", attrSandbox, sb.ID(), "error", err)
		return
	}
	for _, p := range known {
		if _, ok := running[p.Name]; ok || !p.Running {
			continue
		}
		pid, err := sb.StartProcess(ctx, p)
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
