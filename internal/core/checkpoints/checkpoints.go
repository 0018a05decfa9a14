// Package checkpoints keeps sandboxes' checkpoints: their files (and under
// gVisor their memory) recorded in milliseconds while they run, listed,
// compared with the files now, and rolled back to (see
// backend.Checkpointer for how a runtime keeps them).
//
// A rollback restarts the sandbox (core.Manager.Restart): its processes
// end, its files become the checkpoint's, and it starts again, its
// background processes with it, or, with memory, restored as they were at
// the checkpoint.
package checkpoints

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/layerdiff"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// DefaultKeep is how many checkpoints a sandbox keeps: past it, a new one
// deletes the oldest.
const DefaultKeep = 50

// maxTextBytes bounds each side of a file's unified diff.
const maxTextBytes = 1 << 20

// Store is what the service reads of the sandboxes' records.
type Store interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
}

// Config is what a Service is made from.
type Config struct {
	Core      *core.Manager
	Store     Store
	Templates *rootfs.Store
	// Keep is how many checkpoints a sandbox keeps (0: DefaultKeep).
	Keep   int
	Logger *slog.Logger
}

// Service keeps the checkpoints.
type Service struct {
	core      *core.Manager
	store     Store
	templates *rootfs.Store
	keep      int
	log       *slog.Logger
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{core: cfg.Core, store: cfg.Store, templates: cfg.Templates, keep: cfg.Keep, log: cfg.Logger}
	if s.keep <= 0 {
		s.keep = DefaultKeep
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Checkpoint is one checkpoint, as the API shows it.
type Checkpoint = backend.Checkpoint

// Request is what a checkpoint is taken with.
type Request struct {
	Name string
	// Memory keeps the sandbox's memory and processes too (gVisor).
	Memory bool
	// Note says why (the tool call it comes before).
	Note string
}

// Create takes a checkpoint of sandbox id, waking it if suspended. The
// sandbox runs on; with memory it is frozen for the moment of the copy.
func (s *Service) Create(ctx context.Context, id string, req Request) (Checkpoint, error) {
	if len(req.Name) > 200 || len(req.Note) > 1000 {
		return Checkpoint{}, errdefs.InvalidArgument("a checkpoint's name is at most 200 bytes and its note 1000")
	}
	sb, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return Checkpoint{}, err
	}
	defer release()
	return s.CreateIn(ctx, sb, req)
}

// CreateIn takes a checkpoint of sb, which the caller holds running (a
// tool call's, before it runs).
func (s *Service) CreateIn(ctx context.Context, sb *core.Running, req Request) (Checkpoint, error) {
	id := sb.ID()
	if sb.Runtime() == "gvisor" || req.Memory {
		// gVisor's kernel keeps file data of its own: flushed, it is in
		// the writable layer the checkpoint copies.
		res, err := exec.Run(ctx, sb, exec.Request{Cmd: []string{"sync"}, User: "root", Cwd: "/", Timeout: 30 * time.Second},
			func(exec.Stream, []byte) error { return nil })
		if err != nil {
			return Checkpoint{}, err
		}
		if res.ExitCode != 0 {
			return Checkpoint{}, errdefs.Unavailable("sync in sandbox %s before its checkpoint exited with %d", id, res.ExitCode)
		}
	}
	var c Checkpoint
	var pruned []string
	began := time.Now()
	err := sb.Locked(ctx, func(be backend.Backend, h backend.Handle) error {
		cp, err := checkpointer(be)
		if err != nil {
			return err
		}
		if c, err = cp.Checkpoint(ctx, h, backend.Checkpoint{Name: req.Name, Note: req.Note, Memory: req.Memory}); err != nil {
			return err
		}
		pruned, err = s.prune(ctx, cp, h)
		return err
	})
	if err != nil {
		return Checkpoint{}, err
	}
	s.log.Info("checkpoint taken", "sandbox_id", id, "checkpoint", c.ID, "memory", c.Memory, "pruned", pruned, "duration", time.Since(began))
	return c, nil
}

// prune deletes the oldest checkpoints past the number kept.
func (s *Service) prune(ctx context.Context, cp backend.Checkpointer, h backend.Handle) ([]string, error) {
	all, err := cp.Checkpoints(ctx, h, false)
	if err != nil {
		return nil, err
	}
	var pruned []string
	for len(all) > s.keep {
		if err := cp.DeleteCheckpoint(ctx, h, all[0].ID); err != nil {
			return pruned, err
		}
		pruned = append(pruned, all[0].ID)
		all = all[1:]
	}
	return pruned, nil
}

func checkpointer(be backend.Backend) (backend.Checkpointer, error) {
	cp := be.Capabilities().Checkpoint
	if cp == nil {
		return nil, errdefs.NotImplemented("runtime %s cannot take checkpoints", be.Name())
	}
	return cp, nil
}

// on runs fn with sandbox id's checkpointer and handle, under its lock,
// whatever its state: its checkpoints are on its disk, which stays while
// it is suspended. It does not wake it.
func (s *Service) on(ctx context.Context, id string, fn func(rec *store.Sandbox, cp backend.Checkpointer, h backend.Handle) error) error {
	var rec *store.Sandbox
	return s.core.Locked(ctx, id, func(be backend.Backend, h backend.Handle) error {
		cp, err := checkpointer(be)
		if err != nil {
			return err
		}
		if rec, err = s.store.GetSandbox(ctx, id); err != nil {
			return err
		}
		return fn(rec, cp, h)
	})
}

// List lists sandbox id's checkpoints, oldest first.
func (s *Service) List(ctx context.Context, id string) ([]Checkpoint, error) {
	var out []Checkpoint
	err := s.on(ctx, id, func(_ *store.Sandbox, cp backend.Checkpointer, h backend.Handle) (err error) {
		out, err = cp.Checkpoints(ctx, h, true)
		return err
	})
	if out == nil {
		out = []Checkpoint{}
	}
	return out, err
}

// Delete deletes checkpoint c of sandbox id.
func (s *Service) Delete(ctx context.Context, id, c string) error {
	return s.on(ctx, id, func(_ *store.Sandbox, cp backend.Checkpointer, h backend.Handle) error {
		return cp.DeleteCheckpoint(ctx, h, c)
	})
}

// Change is a path that differs between a checkpoint and now.
type Change = layerdiff.Change

// Diff lists what changed in sandbox id's files since checkpoint c. It
// stops at layerdiff.MaxChanges and says so (truncated).
func (s *Service) Diff(ctx context.Context, id, c string) (changes []Change, truncated bool, err error) {
	err = s.on(ctx, id, func(rec *store.Sandbox, cp backend.Checkpointer, h backend.Handle) error {
		lower, err := s.lower(rec)
		if err != nil {
			return err
		}
		changes, err = cp.Diff(ctx, h, lower, c, "")
		if errors.Is(err, layerdiff.ErrTooMany) {
			truncated, err = true, nil
		}
		return err
	})
	if changes == nil {
		changes = []Change{}
	}
	return changes, truncated, err
}

// FileDiff is the unified diff of file path from checkpoint c to now
// ("" when it is the same).
func (s *Service) FileDiff(ctx context.Context, id, c, path string) (string, error) {
	var out string
	err := s.on(ctx, id, func(rec *store.Sandbox, cp backend.Checkpointer, h backend.Handle) error {
		lower, err := s.lower(rec)
		if err != nil {
			return err
		}
		before, inBefore, err := cp.ReadCheckpointFile(ctx, h, lower, c, path, maxTextBytes)
		if err != nil {
			return err
		}
		after, inAfter, err := cp.ReadCheckpointFile(ctx, h, lower, "", path, maxTextBytes)
		if err != nil {
			return err
		}
		if !inBefore && !inAfter {
			return errdefs.NotFound("%s is in neither checkpoint %s nor the sandbox's files now", path, c)
		}
		out = layerdiff.Unified(path, before, after)
		return nil
	})
	return out, err
}

// lower is the root sandbox rec was made from.
func (s *Service) lower(rec *store.Sandbox) (string, error) {
	tmpl, err := s.templates.Version(rec.Template, rec.TemplateVersion)
	if err != nil {
		return "", fmt.Errorf("template of sandbox %s: %w", rec.ID, err)
	}
	return tmpl.RootDir, nil
}

// Rollback brings sandbox id's files back to checkpoint c, and with memory
// its memory and processes too. A running sandbox is restarted for it
// (core.Manager.Restart); a suspended or stopped one takes the files at
// its next start.
func (s *Service) Rollback(ctx context.Context, id, c string, memory bool) (*store.Sandbox, error) {
	// Checked first: a sandbox is not restarted for a checkpoint it
	// does not have.
	all, err := s.List(ctx, id)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(all, func(cp Checkpoint) bool { return cp.ID == c })
	switch {
	case i < 0:
		return nil, errdefs.NotFound("sandbox %s has no checkpoint %s", id, c)
	case memory && !all[i].Memory:
		return nil, errdefs.FailedPrecondition("checkpoint %s of sandbox %s holds its files only: roll back without memory", c, id)
	}
	began := time.Now()
	sb, err := s.core.Restart(ctx, id, "rolled back to checkpoint "+c, func(be backend.Backend, h backend.Handle) error {
		cp, err := checkpointer(be)
		if err != nil {
			return err
		}
		return cp.Rollback(ctx, h, c, memory)
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("sandbox rolled back", "sandbox_id", id, "checkpoint", c, "memory", memory, "duration", time.Since(began))
	return sb, nil
}

// maxUndoBytes bounds what an undo puts back: past it, a rollback is the
// way.
const maxUndoBytes = 64 << 20

// Undone is what an undo put back.
type Undone struct {
	Checkpoint string   // the checkpoint taken before the call undone
	Until      string   // the checkpoint after it ("": the files now)
	Changes    []Change // what the call changed, now as it was before it
}

// Undo undoes what changed between checkpoint c and the checkpoint taken
// after it (with per_tool_call: what the tool call c came before
// changed), leaving every other change: those paths become again what c
// has, in the running sandbox, without a restart. With no checkpoint
// after c, what changed since c is undone (a rollback of files, its
// processes kept).
func (s *Service) Undo(ctx context.Context, id, c string) (Undone, error) {
	out := Undone{Checkpoint: c}
	all, err := s.List(ctx, id)
	if err != nil {
		return out, err
	}
	i := slices.IndexFunc(all, func(cp Checkpoint) bool { return cp.ID == c })
	if i < 0 {
		return out, errdefs.NotFound("sandbox %s has no checkpoint %s", id, c)
	}
	if i+1 < len(all) {
		out.Until = all[i+1].ID
	}
	sb, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return out, err
	}
	defer release()
	var archive bytes.Buffer
	var gone []string // paths c did not have: removed
	err = s.on(ctx, id, func(rec *store.Sandbox, cp backend.Checkpointer, h backend.Handle) error {
		lower, err := s.lower(rec)
		if err != nil {
			return err
		}
		changes, err := cp.Diff(ctx, h, lower, c, out.Until)
		if errors.Is(err, layerdiff.ErrTooMany) {
			return errdefs.FailedPrecondition("more than %d paths changed after checkpoint %s: roll back to it instead", layerdiff.MaxChanges, c)
		}
		if err != nil {
			return err
		}
		out.Changes = changes
		var back []string // paths c had: put back as c has them
		for _, ch := range changes {
			if ch.Kind == layerdiff.Added {
				if !slices.ContainsFunc(gone, func(g string) bool { return strings.HasPrefix(ch.Path, g+"/") }) {
					gone = append(gone, ch.Path)
				}
			} else {
				back = append(back, ch.Path)
			}
		}
		return cp.ArchiveCheckpoint(ctx, h, lower, c, back, &limitedWriter{w: &archive, left: maxUndoBytes})
	})
	if errors.Is(err, errTooBig) {
		return out, errdefs.FailedPrecondition("what changed after checkpoint %s holds more than %d MiB: roll back to it instead", c, maxUndoBytes>>20)
	}
	if err != nil {
		return out, err
	}
	if len(out.Changes) == 0 {
		return out, nil
	}
	// The sandbox's root puts them back, inside: the daemon writes nothing
	// into a running sandbox's layer.
	stdin := base64.StdEncoding.EncodeToString(archive.Bytes())
	script := `rm -rf -- "$@" && base64 -d | tar -x -p --numeric-owner -C / -f -`
	res, err := exec.Run(ctx, sb, exec.Request{Cmd: append([]string{"/bin/sh", "-c", script, "undo"}, gone...), Stdin: &stdin, User: "root", Cwd: "/", Timeout: 5 * time.Minute},
		func(exec.Stream, []byte) error { return nil })
	if err != nil {
		return out, err
	}
	if res.ExitCode != 0 {
		return out, errdefs.Unavailable("putting back what changed after checkpoint %s in sandbox %s exited with %d", c, id, res.ExitCode)
	}
	s.log.Info("changes undone", "sandbox_id", id, "checkpoint", c, "until", out.Until, "paths", len(out.Changes))
	return out, nil
}

var errTooBig = errors.New("too big")

// limitedWriter fails with errTooBig past left bytes.
type limitedWriter struct {
	w    *bytes.Buffer
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.left {
		return 0, errTooBig
	}
	l.left -= len(p)
	return l.w.Write(p)
}
