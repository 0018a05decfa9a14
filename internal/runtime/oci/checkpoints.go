package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/disk"
	"github.com/hutchdev/hutch/internal/runtime/layerdiff"
)

// Checkpoints (backend.Checkpointer). A sandbox's writable layer is on
// its disk's subvolume; a checkpoint is a read-only snapshot of that
// subvolume (see disk.Pool.Checkpoint), taken while the sandbox runs on:
// the snapshot is one moment of the filesystem, as a crash would leave
// it. With memory (gVisor), the sandbox is frozen for the moment and its
// memory and processes saved beside (ID.memory), as a snapshot's are.
// Beside each is ID.json, the checkpoint's record; "next" counts the ids.
//
// A rollback runs on a sandbox the caller suspended: its subvolume
// becomes a copy of the checkpoint's, and with memory the checkpoint's
// image is linked where a suspend leaves one, so that Resume restores it.

// checkpoints is the directory of sandbox id's checkpoints.
func (r *Runtime) checkpoints(id string) (string, error) {
	if !validID(id) {
		return "", errdefs.InvalidArgument("invalid sandbox id %q", id)
	}
	dir, err := r.cfg.Disks.CheckpointsDir(r.layout(id).disk)
	switch {
	case errors.Is(err, disk.ErrNoCheckpoints):
		return "", errdefs.FailedPrecondition("sandbox %s cannot have checkpoints: %v", id, err)
	case errors.Is(err, os.ErrNotExist):
		return "", errdefs.NotFound("sandbox %s has no disk", id)
	}
	return dir, err
}

// Checkpoint takes a checkpoint of running sandbox h (see above).
func (r *Runtime) Checkpoint(ctx context.Context, h backend.Handle, c backend.Checkpoint) (_ backend.Checkpoint, err error) {
	dir, err := r.checkpoints(h.ID)
	if err != nil {
		return c, err
	}
	if c.Memory && !r.cfg.Checkpoints {
		return c, errdefs.FailedPrecondition("runtime %s cannot keep a sandbox's memory in a checkpoint (gVisor can): take one of its files only", r.cfg.Name)
	}
	if c.ID, err = nextCheckpoint(dir); err != nil {
		return c, err
	}
	c.Created = time.Now().UTC()
	link := r.layout(h.ID).disk
	defer func() {
		if err != nil {
			err = errors.Join(err, r.cfg.Disks.DeleteCheckpoint(link, c.ID))
		}
	}()
	began := time.Now()
	if c.Memory {
		err = r.whileFrozen(ctx, h, true, func() error {
			if _, err := r.cfg.Disks.Checkpoint(link, c.ID); err != nil {
				return err
			}
			return r.checkpointRunning(ctx, h.ID, filepath.Join(dir, c.ID+".memory"))
		})
	} else {
		_, err = r.cfg.Disks.Checkpoint(link, c.ID)
	}
	if err != nil {
		return c, fmt.Errorf("checkpoint of sandbox %s: %w", h.ID, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	if err := os.WriteFile(filepath.Join(dir, c.ID+".json"), b, 0o600); err != nil {
		return c, err
	}
	r.log.Debug("checkpoint taken", "sandbox_id", h.ID, "checkpoint", c.ID, "memory", c.Memory, "duration", time.Since(began))
	return c, nil
}

// nextCheckpoint gives the next checkpoint id of dir: c1, c2, …, never one
// given before, even if deleted since (a tool call's result names the
// checkpoint that undoes it).
func nextCheckpoint(dir string) (string, error) {
	counter := filepath.Join(dir, "next")
	n := 1
	if b, err := os.ReadFile(counter); err == nil { // #nosec G304 -- a file of the sandbox's checkpoints
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || n < 1 {
			return "", fmt.Errorf("checkpoint counter %s: %q", counter, b)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o600); err != nil {
		return "", err
	}
	return "c" + strconv.Itoa(n), nil
}

// record reads checkpoint id's record; ErrNotFound when there is none.
func (r *Runtime) record(h backend.Handle, id string) (backend.Checkpoint, string, error) {
	var c backend.Checkpoint
	dir, err := r.checkpoints(h.ID)
	if err != nil {
		return c, "", err
	}
	if !validCheckpoint(id) {
		return c, "", errdefs.NotFound("sandbox %s has no checkpoint %q", h.ID, id)
	}
	b, err := os.ReadFile(filepath.Join(dir, id+".json")) // #nosec G304 -- a checked id in the sandbox's checkpoints
	if errors.Is(err, os.ErrNotExist) {
		return c, "", errdefs.NotFound("sandbox %s has no checkpoint %s", h.ID, id)
	}
	if err != nil {
		return c, "", err
	}
	return c, dir, json.Unmarshal(b, &c)
}

func validCheckpoint(id string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "c"))
	return strings.HasPrefix(id, "c") && err == nil && n > 0 && "c"+strconv.Itoa(n) == id
}

// Checkpoints lists sandbox h's checkpoints, oldest first.
func (r *Runtime) Checkpoints(ctx context.Context, h backend.Handle, sizes bool) ([]backend.Checkpoint, error) {
	dir, err := r.checkpoints(h.ID)
	if err != nil {
		return nil, err
	}
	records, err := filepath.Glob(filepath.Join(dir, "c*.json"))
	if err != nil {
		return nil, err
	}
	var out []backend.Checkpoint
	for _, rec := range records {
		c, _, err := r.record(h, strings.TrimSuffix(filepath.Base(rec), ".json"))
		if err != nil {
			return nil, err
		}
		if sizes {
			c.Size = treeSize(filepath.Join(dir, c.ID, "upper")) + treeSize(filepath.Join(dir, c.ID+".memory"))
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b backend.Checkpoint) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// treeSize is the bytes the regular files under dir hold.
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// DeleteCheckpoint deletes checkpoint id of sandbox h.
func (r *Runtime) DeleteCheckpoint(ctx context.Context, h backend.Handle, id string) error {
	if _, _, err := r.record(h, id); err != nil {
		return err
	}
	return r.cfg.Disks.DeleteCheckpoint(r.layout(h.ID).disk, id)
}

// Rollback makes suspended sandbox h's files checkpoint id's (see above).
func (r *Runtime) Rollback(ctx context.Context, h backend.Handle, id string, memory bool) error {
	c, dir, err := r.record(h, id)
	if err != nil {
		return err
	}
	if memory && !c.Memory {
		return errdefs.FailedPrecondition("checkpoint %s of sandbox %s holds its files only: roll back without memory", id, h.ID)
	}
	if st, err := r.state(ctx, h.ID); err == nil && st.Status != "stopped" {
		return errdefs.FailedPrecondition("sandbox %s is %s: a rollback needs it suspended", h.ID, st.Status)
	}
	layer := r.layout(h.ID)
	if err := os.RemoveAll(layer.checkpoint()); err != nil {
		return err
	}
	if err := r.cfg.Disks.Rollback(layer.disk, id); err != nil {
		return err
	}
	if memory {
		// Resume restores what it finds where a suspend leaves its image,
		// and then removes that: the link, not the checkpoint's image.
		return os.Symlink(filepath.Join(dir, id+".memory"), layer.checkpoint())
	}
	return nil
}

// Diff lists what changed in sandbox h's files from checkpoint from to
// checkpoint to ("": now).
func (r *Runtime) Diff(ctx context.Context, h backend.Handle, lower, from, to string) ([]layerdiff.Change, error) {
	before, err := r.checkpointRoot(h, lower, from)
	if err != nil {
		return nil, err
	}
	after, err := r.checkpointRoot(h, lower, to)
	if err != nil {
		return nil, err
	}
	return layerdiff.Diff(before, after)
}

// ArchiveCheckpoint writes a tar of paths as checkpoint id has them.
func (r *Runtime) ArchiveCheckpoint(ctx context.Context, h backend.Handle, lower, id string, paths []string, w io.Writer) error {
	root, err := r.checkpointRoot(h, lower, id)
	if err != nil {
		return err
	}
	var base uint32 // without a user namespace, ids are as they are
	if ids, ok := mappingOf(r.dir(h.ID)); ok {
		base = ids.base
	}
	return layerdiff.WriteTar(root, paths, base, w)
}

// ReadCheckpointFile reads file path as checkpoint id ("": now) has it.
func (r *Runtime) ReadCheckpointFile(ctx context.Context, h backend.Handle, lower, id, path string, max int64) ([]byte, bool, error) {
	root, err := r.checkpointRoot(h, lower, id)
	if err != nil {
		return nil, false, err
	}
	data, found, err := layerdiff.ReadFile(root, path, max)
	if errors.Is(err, layerdiff.ErrNotFile) {
		err = errdefs.InvalidArgument("%v", err)
	}
	return data, found, err
}

// checkpointRoot is the root sandbox h's files make over lower at
// checkpoint id, or now ("").
func (r *Runtime) checkpointRoot(h backend.Handle, lower, id string) (layerdiff.Root, error) {
	layer := r.layout(h.ID)
	if id == "" {
		if _, err := r.checkpoints(h.ID); err != nil {
			return layerdiff.Root{}, err
		}
		return layerdiff.Root{Upper: layer.upper, Lower: lower}, nil
	}
	_, dir, err := r.record(h, id)
	if err != nil {
		return layerdiff.Root{}, err
	}
	return layerdiff.Root{Upper: filepath.Join(dir, id, "upper"), Lower: lower}, nil
}
