package oci

// Moving a suspended sandbox to another node (backend.Mover, scale-out):
// the node that suspended it exports its writable layer and, when the
// suspend kept them (gVisor), its memory and processes; another node
// imports them into a sandbox directory of its own, as Create would have
// made it there, and resumes it as any sandbox it suspended itself.
//
// What a suspended sandbox has, and Resume expects: its directory (owned by
// the root of its id range, in a user namespace), the link to its disk with
// the writable layer and overlayfs' scratch dir on it, the root's mount
// point, the agent's socket directory, its network namespaces, and the
// checkpoint image when its memory was kept. The bundle, the agent's log
// and socket and the pid file are made anew by each start. The spec's
// Files are in the layer already.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

var _ backend.Mover = (*Runtime)(nil)

// ExportSuspended writes suspended sandbox h's writable layer to layer
// and, when its suspend kept its memory and memory is not nil, its memory
// image to memory (see backend.Mover). The sandbox stays as it
// was: suspended, here.
func (r *Runtime) ExportSuspended(ctx context.Context, h backend.Handle, layer, memory io.Writer) (memoryKept bool, err error) {
	if !validID(h.ID) {
		return false, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	dir := r.dir(h.ID)
	if _, err := os.Stat(dir); err != nil {
		return false, errdefs.NotFound("sandbox %s has no directory on this node: %v", h.ID, err)
	}
	if err := r.suspended(ctx, h.ID); err != nil {
		return false, err
	}
	l := r.layout(h.ID)
	began := time.Now()
	if err := writeLayer(ctx, layer, l.upper, ownersOf(dir)); err != nil {
		return false, fmt.Errorf("export the writable layer of sandbox %s: %w", h.ID, err)
	}
	exported := time.Now()
	if _, err := os.Lstat(l.checkpoint()); memory != nil && !errors.Is(err, fs.ErrNotExist) {
		if err := writeImage(ctx, memory, l.checkpoint()); err != nil {
			return false, fmt.Errorf("export the memory image of sandbox %s: %w", h.ID, err)
		}
		memoryKept = true
	}
	r.log.Debug("sandbox exported", "sandbox_id", h.ID, "layer", exported.Sub(began), "memory", time.Since(exported))
	return memoryKept, nil
}

// suspended fails with errdefs.ErrFailedPrecondition unless sandbox id is
// suspended: its root mounted nowhere, no container of it. A running
// sandbox's layer changes under a copy.
func (r *Runtime) suspended(ctx context.Context, id string) error {
	points, err := mountinfo.InTree(r.dir(id))
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return errdefs.FailedPrecondition("sandbox %s is not suspended (its root is mounted): suspend it before it moves", id)
	}
	st, err := r.state(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return errdefs.FailedPrecondition("sandbox %s is not suspended (its container is %s): suspend it before it moves", id, st.Status)
}

// ImportSuspended makes suspended sandbox s.ID here from what
// ExportSuspended wrote on another node (see backend.Mover): its
// directory, an id range of this node's, a disk of s.Limits.DiskBytes, its
// network, the layer and the memory image when memory is not nil. Resume
// then starts it. Both archives are untrusted (see layerarchive.go). Any
// failure removes what was made.
func (r *Runtime) ImportSuspended(ctx context.Context, s backend.Spec, layer, memory io.Reader) (h backend.Handle, err error) {
	if layer == nil {
		return backend.Handle{}, errdefs.InvalidArgument("sandbox %s: no writable layer to import", s.ID)
	}
	h, dir, err := r.newDir(s.ID)
	if err != nil {
		return h, err
	}
	defer func() { r.rollBack(ctx, h, err, "roll back sandbox import") }()

	began := time.Now()
	own := owners{}
	var ns *userNS
	if r.cfg.UserNamespace {
		if ns, err = r.newUserNS(dir); err != nil {
			return h, fmt.Errorf("sandbox %s: %w", s.ID, err)
		}
		own = owners{ids: ns.ids, mapped: true}
	}
	l := r.layout(s.ID)
	if _, err := r.cfg.Disks.Take(ctx, s.Limits.DiskBytes>>20, l.disk); err != nil {
		return h, fmt.Errorf("disk of sandbox %s: %w", s.ID, err)
	}
	if err := r.makeNetwork(s.ID); err != nil {
		return h, err
	}
	if err := l.makeDirs(ns); err != nil {
		return h, fmt.Errorf("sandbox %s: %w", s.ID, err)
	}
	if err := readLayer(ctx, layer, l.upper, own); err != nil {
		return h, importError(s, layerPart, err)
	}
	extracted := time.Now()
	switch {
	case memory == nil:
	case !r.cfg.Checkpoints:
		// Resume would try to restore it, and start afresh when that
		// failed: the files alone, at once.
		r.log.Warn("a memory image came with a sandbox whose runtime does not restore them; it resumes with its files only", "sandbox_id", s.ID, "runtime", r.cfg.Name)
	default:
		partial := l.checkpoint() + ".partial"
		if err := readImage(ctx, memory, partial, imageLimit(s.Limits)); err != nil {
			return h, importError(s, memoryPart, err)
		}
		if err := os.Rename(partial, l.checkpoint()); err != nil {
			return h, err
		}
	}
	r.log.Debug("sandbox imported", "sandbox_id", s.ID, "layer", extracted.Sub(began), "memory", time.Since(extracted))
	return h, nil
}

// imageLimit bounds the memory image of a sandbox with limits: what its
// memory holds, and its kernel's state, cannot be much more than its
// memory limit. A larger one fills the host's disk, not the sandbox's.
func imageLimit(l backend.Limits) int64 {
	if l.MemoryBytes <= 0 {
		return 0
	}
	return 2*l.MemoryBytes + 256<<20
}

// The parts of a sandbox an import reads.
const (
	layerPart  = "writable layer"
	memoryPart = "memory image"
)

// importError says what went wrong importing part of sandbox s.
func importError(s backend.Spec, part string, err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		if part == layerPart {
			return errdefs.ResourceExhausted("the writable layer of sandbox %s does not fit in its disk of %d MiB: import it with a larger disk limit", s.ID, s.Limits.DiskBytes>>20)
		}
		return errdefs.ResourceExhausted("the %s of sandbox %s does not fit on this node's disk: %v", part, s.ID, err)
	}
	var kind *errdefs.Error
	if errors.As(err, &kind) {
		// The archive's fault: what was refused, for a person to see.
		return &errdefs.Error{Kind: kind.Kind, Msg: fmt.Sprintf("import the %s of sandbox %s: %s", part, s.ID, err)}
	}
	return fmt.Errorf("import the %s of sandbox %s: %w", part, s.ID, err)
}

// Has says whether this node has sandbox id's directory.
func (r *Runtime) Has(id string) bool {
	if !validID(id) {
		return false
	}
	fi, err := os.Lstat(r.dir(id))
	return err == nil && fi.IsDir()
}
