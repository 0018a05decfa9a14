package core

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Running is a sandbox held running for one call (see Manager.Acquire):
// what the services beside the core (exec and processes, files, tools,
// templates) reach a sandbox through. Until the call's release, the idle
// timer leaves the sandbox alone and a suspend or stop is refused; a
// delete is not, and the call's next agent request then fails, which Err
// turns into what happened. The hooks see one in their steps, and one a
// look at a live sandbox finds (hook.Kernel's Peek), which is not held.
type Running struct {
	m    *Manager
	inst *instance
	// woken: the sandbox was started again for this call (see acquire).
	woken bool
}

// Woken says the sandbox was started again (resumed) for this call, by it
// or by a call it waited for: its services may not listen yet.
func (r *Running) Woken() bool { return r.woken }

// ID is the sandbox's id.
func (r *Running) ID() string { return r.inst.id }

// Workspace is the workspace the sandbox belongs to ("" for a warm
// pool's, no one's yet).
func (r *Running) Workspace() string {
	r.inst.mu.Lock()
	defer r.inst.mu.Unlock()
	return r.inst.owner.workspace
}

// Runtime is the name of the backend the sandbox runs on.
func (r *Running) Runtime() string { return r.inst.backend.Name() }

// Agent is the client of the sandbox's agent, for the calls that need no
// more than it. A call whose request fails returns Err(ctx, err).
func (r *Running) Agent() *agentclient.Client { return r.inst.agent }

// CommandEnv is the environment of a command run for forUser ("": the
// sandbox's user) with env of its own: the sandbox's, its secrets, env.
// A terminal's command and a code context's kernel start with it.
func (r *Running) CommandEnv(ctx context.Context, forUser string, env map[string]string) (map[string]string, error) {
	return r.m.commandEnv(ctx, r.inst, forUser, env)
}

// Lost is what a call whose connection to the agent broke with err
// returns: when a fresh connection finds the agent gone, the sandbox is
// marked error (keeping its files) and the error says so; when the
// sandbox was deleted under the call, that is what it says; otherwise
// err.
func (r *Running) Lost(ctx context.Context, err error) error {
	return r.m.callErr(ctx, r.inst, r.m.lostAgent(ctx, r.inst, err))
}

// LimitHits are the counts of the limits the sandbox hit at the last look
// (prev) and now, which become the last look: what a command that failed
// meanwhile is put down to. The hooks add what the backend cannot count
// (hook.Counter: the processes the daemon killed for its memory).
func (r *Running) LimitHits(ctx context.Context) (prev, now backend.LimitHits, err error) {
	inst := r.inst
	now, err = inst.backend.LimitHits(ctx, inst.handle)
	if err != nil {
		r.m.log.Warn("read limit hits", attrSandbox, inst.id, "error", err)
		return prev, now, err
	}
	r.m.hooks.CountHits(inst.id, &now)
	inst.mu.Lock()
	prev, inst.limitHits = inst.limitHits, now
	inst.mu.Unlock()
	return prev, now, nil
}

// Logger is the kernel's log, for what a call sees go wrong in passing.
func (r *Running) Logger() *slog.Logger { return r.m.log }

// Err is what a call whose request to the agent failed with err returns:
// when the agent is gone, the sandbox is marked error (keeping its files)
// and the error says so; when the sandbox was deleted under the call, that
// is what it says; otherwise err.
func (r *Running) Err(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errdefs.ErrUnavailable) {
		err = r.m.lostAgent(ctx, r.inst, err)
	}
	return r.m.callErr(ctx, r.inst, err)
}

// Locked runs fn with the sandbox's backend and handle under its lock, as
// a change of its life does (a snapshot's copy): a delete, pause or
// suspend waits for it. It fails when the sandbox stopped meanwhile.
func (r *Running) Locked(ctx context.Context, fn func(be backend.Backend, h backend.Handle) error) error {
	unlock, err := r.m.locks.Lock(ctx, r.inst.id)
	if err != nil {
		return err
	}
	defer unlock()
	if !r.m.isLive(r.inst) {
		return r.m.notLive(ctx, r.inst.id)
	}
	return fn(r.inst.backend, r.inst.handle)
}

// Acquire returns sandbox id running, for a call: thawed if it was paused,
// started again if it was suspended or had failed. Call release when the
// call ends.
func (m *Manager) Acquire(ctx context.Context, id string) (r *Running, release func(), err error) {
	inst, release, woken, err := m.acquire(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return &Running{m: m, inst: inst, woken: woken}, release, nil
}

// Holding returns rc (or err) such that closing rc calls release: a stream
// read from a sandbox's agent holds its sandbox until it is closed. When
// err is not nil, release is called at once.
func Holding(rc io.ReadCloser, err error, release func()) (io.ReadCloser, error) {
	if err != nil {
		release()
		return nil, err
	}
	return &releaseOnClose{ReadCloser: rc, release: release}, nil
}

type releaseOnClose struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releaseOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
