package processes

import (
	"context"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Background processes are commands started through the API that outlive
// the request (a dev server, a worker). The agent runs them under the tag
// Tag(name) and keeps their latest output (their logs); the store keeps
// how to start them, so that a resume starts again those that ran when
// the sandbox was suspended (the Keeper). A running one keeps its sandbox
// awake, unless it is a service (it has a port).
const (
	tagPrefix = "hutch-process:"
	// logBytes is how much of a process's latest output is kept.
	logBytes = 1 << 20
)

// Tag is the agent's tag of background process name.
func Tag(name string) string { return tagPrefix + name }

// Start starts p in sandbox sb's agent and returns its pid once it runs;
// the process outlives the request that starts it.
func Start(ctx context.Context, sb hook.Sandbox, p *store.Process) (uint32, error) {
	cwd := rootfs.Workspace
	if p.Cwd != "" {
		cwd = rootfs.WorkspacePath(p.Cwd)
	}
	env, err := sb.CommandEnv(ctx, p.ForUser, p.Env)
	if err != nil {
		return 0, err
	}
	cmd := agentclient.Command{
		Argv: p.Argv, Env: env, Cwd: cwd, User: rootfs.UserOr(p.User),
		Tag: Tag(p.Name), KeepOutput: logBytes, StdinOpen: p.Stdin,
	}
	// Only the start is awaited: leaving the stream does not stop the
	// process (envd's semantics).
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	exe, err := sb.Agent().Start(sctx, cmd)
	if err != nil {
		return 0, err
	}
	_ = exe.Close()
	return exe.Pid, nil
}

// Running asks sandbox sb's agent which background processes run: their
// pids by name.
func Running(ctx context.Context, sb hook.Sandbox) (map[string]uint32, error) {
	procs, err := sb.Agent().Processes(ctx)
	if err != nil {
		return nil, err
	}
	running := map[string]uint32{}
	for _, p := range procs {
		if name, ok := strings.CutPrefix(p.Tag, tagPrefix); ok {
			running[name] = p.Pid
		}
	}
	return running, nil
}
