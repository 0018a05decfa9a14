package core

import (
	"context"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Background processes: commands started through the API that outlive the
// request (a dev server, a worker). The agent runs them under the tag
// ProcessTag(name) and keeps their latest output (their logs); the store
// keeps how to start them, so that a resume starts again those that ran
// when the sandbox was suspended (the processes hook,
// internal/core/processes). A running one keeps its sandbox awake.
const (
	processTagPrefix = "hutch-process:"
	// processLogBytes is how much of a process's latest output is kept.
	processLogBytes = 1 << 20
)

// ProcessTag is the agent's tag of background process name.
func ProcessTag(name string) string { return processTagPrefix + name }

// startProcess starts p in the sandbox's agent and returns its pid once it
// runs; the process outlives the request that starts it.
func (m *Manager) startProcess(ctx context.Context, inst *instance, p *store.Process) (uint32, error) {
	cwd := rootfs.Workspace
	if p.Cwd != "" {
		cwd = rootfs.WorkspacePath(p.Cwd)
	}
	env, err := m.commandEnv(ctx, inst, p.ForUser, p.Env)
	if err != nil {
		return 0, err
	}
	cmd := agentclient.Command{
		Argv: p.Argv, Env: env, Cwd: cwd, User: rootfs.UserOr(p.User),
		Tag: ProcessTag(p.Name), KeepOutput: processLogBytes, StdinOpen: p.Stdin,
	}
	// Only the start is awaited: leaving the stream does not stop the
	// process (envd's semantics).
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	exe, err := inst.agent.Start(sctx, cmd)
	if err != nil {
		return 0, err
	}
	_ = exe.Close()
	return exe.Pid, nil
}

// runningProcesses asks a live sandbox's agent which background processes
// run: their pids by name.
func (m *Manager) runningProcesses(ctx context.Context, inst *instance) (map[string]uint32, error) {
	procs, err := inst.agent.Processes(ctx)
	if err != nil {
		return nil, err
	}
	running := map[string]uint32{}
	for _, p := range procs {
		if name, ok := strings.CutPrefix(p.Tag, processTagPrefix); ok {
			running[name] = p.Pid
		}
	}
	return running, nil
}

// services names a sandbox's services (background processes with a
// port): they are not activity by running (see reap).
func (m *Manager) services(ctx context.Context, id string) (map[string]bool, error) {
	known, err := m.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, p := range known {
		if p.Port > 0 {
			names[p.Name] = true
		}
	}
	return names, nil
}
