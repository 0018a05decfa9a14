package sandbox

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/template"
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
const maxForks = 10

// Snapshot makes template name from sandbox id's files as they are now,
// waking it if suspended. A name that another kind of template has is a
// conflict.
func (m *Manager) Snapshot(ctx context.Context, id, name string) (template.Info, error) {
	if err := template.CheckName(name); err != nil {
		return template.Info{}, err
	}
	if name == template.HostName {
		return template.Info{}, errdefs.InvalidArgument("a snapshot cannot be named %s", template.HostName)
	}
	inst, release, err := m.acquire(ctx, id)
	if err != nil {
		return template.Info{}, err
	}
	defer release()
	snap, ok := inst.backend.(backend.Snapshotter)
	if !ok {
		return template.Info{}, errdefs.NotImplemented("runtime %s cannot snapshot sandboxes", inst.backend.Name())
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return template.Info{}, err
	}
	parent, err := m.templates.Version(rec.Template, rec.TemplateVersion)
	if err != nil {
		return template.Info{}, err
	}
	// What the sandbox wrote may still be in its kernel's cache (gVisor's
	// sentry keeps file data): flushed, it is in the writable layer.
	res, err := m.run(ctx, inst, []string{"sync"}, ExecRequest{User: "root", Cwd: "/"}, 30*time.Second, func(Stream, []byte) error { return nil })
	if err != nil {
		return template.Info{}, m.callErr(ctx, inst, err)
	}
	if res.ExitCode != 0 {
		return template.Info{}, m.callErr(ctx, inst, errdefs.Unavailable("sync in sandbox %s before its snapshot exited with %d", id, res.ExitCode))
	}
	// The copy is a change of the sandbox's life: under its lock, a
	// delete, pause or suspend waits for it.
	unlock, err := m.locks.lock(ctx, id)
	if err != nil {
		return template.Info{}, err
	}
	defer unlock()
	if !m.isLive(inst) {
		return template.Info{}, m.notLive(ctx, id)
	}
	began := time.Now()
	info, err := m.templates.Snapshot(ctx, name, parent, id, inst.backend.Name(), func(root, memory string) (bool, error) {
		return snap.Snapshot(ctx, inst.handle, root, memory)
	})
	if err != nil {
		return template.Info{}, err
	}
	m.log.Info("sandbox snapshot made", attrSandbox, id, "template", name, "version", info.Version,
		"memory", info.MemoryRuntime != "", "duration", time.Since(began))
	// The versions before it that no sandbox uses go (a memory image is
	// as big as the sandbox's memory).
	if err := m.pruneTemplates(ctx); err != nil {
		m.log.Warn("prune old template versions", "error", err)
	}
	return info, nil
}

// Fork makes count new sandboxes from sandbox id's files as they are now,
// each with its runtime, limits, env, metadata, timers, volumes and
// background processes (going on from the snapshot's memory under gVisor,
// started again otherwise, as after a resume); the snapshot they start
// from is template "fork-<id>" (a new version per fork). On failure none
// of them is left.
func (m *Manager) Fork(ctx context.Context, id string, count int) ([]*Sandbox, error) {
	if count < 1 || count > maxForks {
		return nil, errdefs.InvalidArgument("count must be between 1 and %d, got %d", maxForks, count)
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	info, err := m.Snapshot(ctx, id, "fork-"+id)
	if err != nil {
		return nil, err
	}
	meta := maps.Clone(rec.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta["forked_from"] = id
	opts := CreateOptions{
		Template: info.Name, Runtime: rec.Backend, CPUs: rec.CPUs, MemoryMB: rec.MemoryMB, Pids: rec.Pids,
		DiskMB: rec.DiskMB, Env: rec.Env, Metadata: meta, IdleTimeout: rec.IdleTimeout, IdleAction: rec.IdleAction,
		MaxLifetime: max(time.Until(rec.ExpiresAt), time.Second), Volumes: view(rec).Volumes,
	}
	procs, err := m.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	var made []*Sandbox
	for range count {
		sb, err := m.Create(ctx, opts)
		if err == nil {
			made = append(made, sb)
			err = m.forkProcesses(ctx, sb.ID, procs)
		}
		if err != nil {
			for _, s := range made {
				err = errors.Join(err, m.Delete(context.WithoutCancel(ctx), s.ID))
			}
			return nil, err
		}
	}
	return made, nil
}

// forkProcesses gives a fork its source's background processes: those
// that ran and were not restored with the memory start again.
func (m *Manager) forkProcesses(ctx context.Context, id string, procs []*store.Process) error {
	if len(procs) == 0 {
		return nil
	}
	for _, p := range procs {
		c := *p
		c.SandboxID = id
		if err := m.store.PutProcess(ctx, &c); err != nil {
			return err
		}
	}
	inst, release, err := m.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	m.restartProcesses(ctx, inst)
	return nil
}
