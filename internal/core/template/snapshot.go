package template

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Snapshots and forks. A snapshot is a template (source "snapshot") made
// from a running sandbox: the root of the template version the sandbox was
// made from, with what the sandbox changed applied, copied while it is
// frozen for a moment. Sandboxes start from it like from any template
// ("from_snapshot"), and a fork is a snapshot and sandboxes made from it.
// Under gVisor a snapshot holds the sandbox's memory and processes too,
// saved at the moment its files were copied: sandboxes of gVisor made from
// it go on from there (the other runtimes start afresh on the files).

// maxForks bounds one fork call.
const maxForks = 100

// Snapshot makes template name from sandbox id's files as they are now,
// waking it if suspended. name is qualified with the sandbox's workspace
// (workspace.Qualify): a snapshot is never shared. A name that another kind of template has is a
// conflict.
func (s *Service) Snapshot(ctx context.Context, id, name string) (rootfs.Info, error) {
	if err := rootfs.CheckName(name); err != nil {
		return rootfs.Info{}, err
	}
	if name == rootfs.HostName {
		return rootfs.Info{}, errdefs.InvalidArgument("a snapshot cannot be named %s", rootfs.HostName)
	}
	sb, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return rootfs.Info{}, err
	}
	defer release()
	rec, err := s.store.GetSandbox(ctx, id)
	if err != nil {
		return rootfs.Info{}, err
	}
	if _, ws := workspace.Split(name); ws != rec.Workspace {
		// What a sandbox holds stays in its workspace, whoever asks.
		return rootfs.Info{}, errdefs.InvalidArgument("snapshot %s of sandbox %s: a snapshot is its sandbox's workspace's (%s)", name, id, rec.Workspace)
	}
	parent, err := s.templates.Version(rec.Template, rec.TemplateVersion)
	if err != nil {
		return rootfs.Info{}, err
	}
	// What the sandbox wrote may still be in its kernel's cache (gVisor's
	// sentry keeps file data): flushed, it is in the writable layer.
	res, err := exec.Run(ctx, sb, exec.Request{Cmd: []string{"sync"}, User: "root", Cwd: "/", Timeout: 30 * time.Second},
		func(exec.Stream, []byte) error { return nil })
	if err != nil {
		return rootfs.Info{}, err
	}
	if res.ExitCode != 0 {
		return rootfs.Info{}, sb.Err(ctx, errdefs.Unavailable("sync in sandbox %s before its snapshot exited with %d", id, res.ExitCode))
	}
	// The copy is a change of the sandbox's life: under its lock, a
	// delete, pause or suspend waits for it.
	began := time.Now()
	var info rootfs.Info
	err = sb.Locked(ctx, func(be backend.Backend, h backend.Handle) error {
		snap := be.Capabilities().Snapshot
		if snap == nil {
			return errdefs.NotImplemented("runtime %s cannot snapshot sandboxes", be.Name())
		}
		// The commit tells the core, which removes the versions before
		// it that no sandbox uses (a memory image is as big as the
		// sandbox's memory).
		info, err = s.templates.Snapshot(ctx, name, parent, id, be.Name(), func(root, memory string) (bool, error) {
			return snap.Snapshot(ctx, h, root, memory)
		})
		return err
	})
	if err != nil {
		return rootfs.Info{}, err
	}
	s.log.Info("sandbox snapshot made", "sandbox_id", id, "template", name, "version", info.Version,
		"memory", info.MemoryRuntime != "", "duration", time.Since(began))
	return info, nil
}

// Fork makes count new sandboxes from sandbox id's files as they are now,
// each with its runtime, limits, env, metadata, timers, volumes and
// background processes (going on from the snapshot's memory under gVisor,
// started again otherwise, as after a resume); the snapshot they start
// from is its workspace's template "fork-<id>" (a new version per fork), and
// their network policy the source's, which ceiling (the caller's key's, ""
// for any) must allow. Each copy is its own sandbox (its own network
// address, hostname, disk and workspace secrets), sharing the snapshot's
// files and memory image read-only. A copy that fails is reported in its
// place and leaves nothing; the call fails only when none was made.
func (s *Service) Fork(ctx context.Context, id string, count int, ceiling netpolicy.Mode) (_ []ForkResult, err error) {
	if count < 1 || count > maxForks {
		return nil, errdefs.InvalidArgument("count must be between 1 and %d, got %d", maxForks, count)
	}
	rec, err := s.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	defer func(began time.Time) {
		s.observed(hook.Step{Name: "fork", Sandbox: id, Workspace: rec.Workspace, Runtime: rec.Backend, Took: time.Since(began), Err: err})
	}(time.Now())
	// The fork's snapshot is the sandbox's workspace's own: a shared one
	// would show its files to every workspace.
	info, err := s.Snapshot(ctx, id, workspace.Qualify("fork-"+id, rec.Workspace))
	if err != nil {
		return nil, err
	}
	meta := maps.Clone(rec.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta["forked_from"] = id
	network := rec.Network
	opts := create.Options{
		Template: info.Name, Runtime: rec.Backend, CPUs: rec.CPUs, MemoryMB: rec.MemoryMB, Pids: rec.Pids,
		DiskMB: rec.DiskMB, Env: rec.Env, Metadata: meta, IdleTimeout: rec.IdleTimeout, IdleAction: rec.IdleAction, Checkpoints: rec.Checkpoints, OnSuspend: rec.OnSuspend, OnResume: rec.OnResume,
		MaxLifetime: max(time.Until(rec.ExpiresAt), time.Second), Volumes: slices.Clone(rec.Volumes),
		Workspace: rec.Workspace, User: rec.User, Secrets: rec.Secrets,
		// The source's network policy, which the caller's key must allow.
		Network: &network, NetworkCeiling: ceiling,
	}
	procs, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	// The copies are made side by side, a few at a time: each is a
	// create (under gVisor a restore of the snapshot's memory), which
	// waits on the runtime as much as it computes.
	results := make([]ForkResult, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, forkParallel)
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sb, _, err := s.core.Create(ctx, opts) // no key: always a new one
			if err == nil {
				if err = s.forkProcesses(ctx, sb.ID, procs); err != nil {
					err = errors.Join(err, s.core.Delete(context.WithoutCancel(ctx), sb.ID))
				}
			}
			if err != nil {
				results[i].Err = err
				return
			}
			results[i].Sandbox = sb
		}()
	}
	wg.Wait()
	var made []*store.Sandbox
	var errs []error
	for i, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("copy %d: %w", i+1, r.Err))
			continue
		}
		made = append(made, r.Sandbox)
	}
	if len(made) == 0 {
		return nil, errors.Join(errs...)
	}
	if len(errs) > 0 {
		s.log.Warn("a fork made some of its copies only", "sandbox_id", id, "made", len(made), "failed", len(errs), "error", errors.Join(errs...))
	}
	return results, nil
}

// forkParallel is how many of a fork's copies are made at once.
const forkParallel = 4

// ForkResult is one copy of a fork: made, or why not.
type ForkResult struct {
	Sandbox *store.Sandbox
	Err     error
}

// forkProcesses gives a fork its source's background processes: those
// that ran and were not restored with the memory start again.
func (s *Service) forkProcesses(ctx context.Context, id string, procs []*store.Process) error {
	if len(procs) == 0 {
		return nil
	}
	for _, p := range procs {
		c := *p
		c.SandboxID = id
		if err := s.store.PutProcess(ctx, &c); err != nil {
			return err
		}
	}
	if s.processes == nil {
		return nil
	}
	sb, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	s.processes.Restart(ctx, sb)
	return nil
}
