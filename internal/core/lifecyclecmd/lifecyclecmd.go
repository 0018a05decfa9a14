// Package lifecyclecmd runs the commands a sandbox was made with for its
// sleep and wake: on_suspend before it is suspended or stopped (flush a
// database to disk, close connections), on_resume once it runs again
// (re-read a configuration, reconnect). A hook of the kernel: it knows the
// kernel by internal/core/hook only.
package lifecyclecmd

import (
	"context"
	"log/slog"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Timeout bounds each command: a suspend does not wait longer for it.
const Timeout = 60 * time.Second

// Store is what the hook reads of a sandbox's record.
type Store interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

// Hook runs the commands (hook.Suspender, hook.Resumer).
type Hook struct {
	store Store
	log   *slog.Logger
}

// New returns the hook.
func New(st Store, log *slog.Logger) *Hook {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hook{store: st, log: log}
}

// Name names the hook.
func (*Hook) Name() string { return "lifecycle commands" }

// Suspending runs on_suspend, before the sandbox is suspended or stopped.
func (h *Hook) Suspending(ctx context.Context, sb hook.Sandbox) {
	h.run(ctx, sb, "on_suspend", func(rec *store.Sandbox) string { return rec.OnSuspend })
}

// Resumed runs on_resume, once the sandbox runs again.
func (h *Hook) Resumed(ctx context.Context, sb hook.Sandbox) {
	h.run(ctx, sb, "on_resume", func(rec *store.Sandbox) string { return rec.OnResume })
}

// run runs the command which of the sandbox's record gives, as its user
// with its env, and logs how it ended: a failure does not stop the
// suspend or the resume.
func (h *Hook) run(ctx context.Context, sb hook.Sandbox, name string, which func(*store.Sandbox) string) {
	rec, err := h.store.GetSandbox(ctx, sb.ID())
	if err != nil || which(rec) == "" {
		return
	}
	env, err := sb.CommandEnv(ctx, "", nil)
	if err != nil {
		h.log.Warn("the sandbox's "+name+" command did not run", "sandbox_id", sb.ID(), "error", err)
		return
	}
	began := time.Now()
	st, err := sb.Agent().Run(ctx, agentclient.Command{
		Argv: []string{"/bin/sh", "-c", which(rec)}, Env: env, Cwd: rootfs.Workspace, User: rootfs.UserOr(""), Timeout: Timeout,
	})
	switch {
	case err != nil:
		h.log.Warn("the sandbox's "+name+" command failed", "sandbox_id", sb.ID(), "error", err)
	case !st.Exited || st.Code != 0:
		h.log.Warn("the sandbox's "+name+" command failed", "sandbox_id", sb.ID(), "exit_code", st.Code, "signal", st.Signal, "timed_out", st.TimedOut)
	default:
		h.log.Info("the sandbox's "+name+" command ran", "sandbox_id", sb.ID(), "duration", time.Since(began))
	}
}
