// Package move moves suspended sandboxes between nodes (scale-out, with
// a shared image store): a hook of the lifecycle kernel. Once a sandbox
// is suspended (hook.Halter), its node uploads its writable layer (and
// its memory image, under gVisor) and records the image's name on it; an
// API replica that finds its node lost hands it to another node
// (store.MoveSandbox), whose resume downloads the image and imports it
// (backend.Mover) before it starts the sandbox as its own
// (hook.Importer). A sandbox that runs again (wherever) has its image
// dropped (hook.Resumer): its files have changed since. A deleted one's
// images go with its teardown (hook.Remover).
//
// The upload holds the sandbox's lock (hook.Kernel): a call that wakes
// the sandbox meanwhile waits for it, so that the image is the files as
// they were suspended, whole.
package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/imagestore"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// uploadTimeout bounds one upload (a memory image is gigabytes at most).
const uploadTimeout = 10 * time.Minute

// Store is where the sandboxes' records, and their images' names, are.
type Store interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	SetImage(ctx context.Context, id, node, image string) error
}

// Config wires the hook.
type Config struct {
	Store  Store
	Images imagestore.Store
	// Node names this daemon among the nodes (core.Config.Node).
	Node string
	// Backends are the runtimes, by name; those that are backend.Movers
	// have their sandboxes moved.
	Backends []backend.Backend
	Logger   *slog.Logger
	// Now tells the time images are named by (time.Now when nil).
	Now func() time.Time
}

// Mover is the hook. It is safe for concurrent use.
type Mover struct {
	cfg    Config
	movers map[string]backend.Mover
	log    *slog.Logger
	kernel hook.Kernel
}

// New returns the hook.
func New(cfg Config) *Mover {
	m := &Mover{cfg: cfg, movers: map[string]backend.Mover{}, log: cfg.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.cfg.Now == nil {
		m.cfg.Now = time.Now
	}
	for _, be := range cfg.Backends {
		if mv := be.Capabilities().Move; mv != nil {
			m.movers[be.Name()] = mv
		}
	}
	return m
}

// Name names the hook.
func (m *Mover) Name() string { return "move" }

// Attach takes the kernel's lock and background work (hook.Attacher).
func (m *Mover) Attach(k hook.Kernel) { m.kernel = k }

const attrSandbox = "sandbox_id"

// prefix is where sandbox id's images are in the store.
func prefix(id string) string { return "sandboxes/" + id + "/" }

// Suspended uploads suspended sandbox id's image in the background, once
// its lock is let go (hook.Halter).
func (m *Mover) Suspended(id string) {
	m.kernel.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), uploadTimeout)
		defer cancel()
		began := time.Now()
		image, size, err := m.upload(ctx, id)
		switch {
		case err != nil:
			m.log.Warn("upload of a suspended sandbox's image failed: it resumes on this node only", attrSandbox, id, "error", err)
		case image != "":
			m.log.Info("suspended sandbox's image uploaded", attrSandbox, id, "image", image, "bytes", size, "duration", time.Since(began))
		}
	})
}

// upload exports sandbox id, if it is still suspended here, to a new
// image, records it, and drops the older ones. image is "" when there was
// nothing to do.
func (m *Mover) upload(ctx context.Context, id string) (image string, size int64, err error) {
	unlock, err := m.kernel.Lock(ctx, id)
	if err != nil {
		return "", 0, err
	}
	defer unlock()
	rec, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil || rec.State != store.Suspended || rec.Node != m.cfg.Node {
		return "", 0, nil // woken, moved or deleted meanwhile
	}
	mover, ok := m.movers[rec.Backend]
	if !ok {
		return "", 0, nil
	}
	image = strings.Replace(m.cfg.Now().UTC().Format("20060102T150405.000000000Z"), ".", "", 1)
	dir := prefix(id) + image + "/"
	// ExportSuspended writes the layer, then the memory: each goes to
	// its blob through a pipe, both uploads under way at once.
	layerR, layerW := io.Pipe()
	memR, memW := io.Pipe()
	counted := &counter{}
	puts := make(chan error, 2)
	go func() { puts <- m.cfg.Images.Put(ctx, dir+"layer.tar", io.TeeReader(layerR, counted)) }()
	go func() { puts <- m.cfg.Images.Put(ctx, dir+"memory.tar", io.TeeReader(memR, counted)) }()
	kept, err := mover.ExportSuspended(ctx, backend.Handle{ID: id, Backend: rec.Backend, State: rec.Handle}, layerW, memW)
	layerW.CloseWithError(err)
	memW.CloseWithError(err)
	err = errors.Join(err, <-puts, <-puts)
	if err == nil && !kept {
		err = m.cfg.Images.Delete(ctx, dir+"memory.tar")
	}
	if err == nil {
		err = m.cfg.Store.SetImage(ctx, id, m.cfg.Node, image)
	}
	if err != nil {
		return "", 0, errors.Join(err, m.drop(context.WithoutCancel(ctx), id, ""))
	}
	return image, counted.n.Load(), m.drop(ctx, id, image)
}

// counter counts what goes through it, from both parts of an image at
// once (the uploads run side by side).
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// drop deletes sandbox id's images but keep ("": all of them).
func (m *Mover) drop(ctx context.Context, id, keep string) error {
	blobs, err := m.cfg.Images.List(ctx, prefix(id))
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range blobs {
		if keep != "" && strings.HasPrefix(b.Name, prefix(id)+keep+"/") {
			continue
		}
		errs = append(errs, m.cfg.Images.Delete(ctx, b.Name))
	}
	return errors.Join(errs...)
}

// Import makes suspended sandbox rec, moved here from another node, from
// its image: nil when it is this node's own already (hook.Importer). The
// kernel holds its lock.
func (m *Mover) Import(ctx context.Context, rec *store.Sandbox, spec backend.Spec) (*backend.Handle, error) {
	mover, ok := m.movers[rec.Backend]
	if !ok || mover.Has(rec.ID) {
		return nil, nil
	}
	if rec.Image == "" {
		return nil, errdefs.Unavailable("sandbox %s has no files on this node (%s) and no image in a shared image store to resume from", rec.ID, m.cfg.Node)
	}
	began := time.Now()
	dir := prefix(rec.ID) + rec.Image + "/"
	layer, err := m.cfg.Images.Get(ctx, dir+"layer.tar")
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: its image's layer: %w", rec.ID, err)
	}
	defer layer.Close()
	var memory io.Reader
	switch mem, err := m.cfg.Images.Get(ctx, dir+"memory.tar"); {
	case errors.Is(err, errdefs.ErrNotFound): // files only
	case err != nil:
		return nil, fmt.Errorf("sandbox %s: its image's memory: %w", rec.ID, err)
	default:
		defer mem.Close()
		memory = mem
	}
	counted := &counter{}
	if memory != nil {
		memory = io.TeeReader(memory, counted)
	}
	h, err := mover.ImportSuspended(ctx, spec, io.TeeReader(layer, counted), memory)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: import its image: %w", rec.ID, err)
	}
	m.log.Info("sandbox moved here from another node", attrSandbox, rec.ID, "image", rec.Image, "memory", memory != nil,
		"bytes", counted.n.Load(), "duration", time.Since(began))
	return &h, nil
}

// Resumed drops the image of a sandbox that runs again, in the
// background: its files are no longer the image's (hook.Resumer).
func (m *Mover) Resumed(_ context.Context, sb hook.Sandbox) {
	id := sb.ID()
	m.kernel.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rec, err := m.cfg.Store.GetSandbox(ctx, id)
		if err != nil || rec.Image == "" {
			return
		}
		if err := errors.Join(m.cfg.Store.SetImage(ctx, id, m.cfg.Node, ""), m.drop(ctx, id, "")); err != nil {
			m.log.Warn("drop the image of a sandbox that runs again", attrSandbox, id, "error", err)
		}
	})
}

// Removed drops a deleted sandbox's images (hook.Remover).
func (m *Mover) Removed(ctx context.Context, id string) error {
	return m.drop(ctx, id, "")
}
