package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Moving suspended sandboxes (scale-out, with a shared image store,
// Config.Images): once a sandbox is suspended, its node uploads its
// writable layer (and its memory image, under gVisor) and records the
// image's name on it; an API replica that finds its node lost hands it to
// another node (store.MoveSandbox), whose resume downloads the image and
// imports it (backend.Mover) before it starts the sandbox as its own. A
// sandbox that runs again (wherever) has its image dropped: its files
// have changed since.
//
// The upload holds the sandbox's lock: a call that wakes the sandbox
// meanwhile waits for it, so that the image is the files as they were
// suspended, whole.

// uploadTimeout bounds one upload (a memory image is gigabytes at most).
const uploadTimeout = 10 * time.Minute

// imagePrefix is where sandbox id's images are in the store.
func imagePrefix(id string) string { return "sandboxes/" + id + "/" }

// uploadImage uploads suspended sandbox id's image in the background.
func (m *Manager) uploadImage(id string) {
	if m.images == nil {
		return
	}
	m.reaps.Add(1)
	go func() {
		defer m.reaps.Done()
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
	}()
}

// upload exports sandbox id, if it is still suspended here, to a new
// image, records it, and drops the older ones. image is "" when there was
// nothing to do.
func (m *Manager) upload(ctx context.Context, id string) (image string, size int64, err error) {
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return "", 0, err
	}
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil || rec.State != store.Suspended || rec.Node != m.node {
		return "", 0, nil // woken, moved or deleted meanwhile
	}
	mover, ok := m.backends[rec.Backend].(backend.Mover)
	if !ok {
		return "", 0, nil
	}
	image = strings.Replace(m.clock.Now().UTC().Format("20060102T150405.000000000Z"), ".", "", 1)
	prefix := imagePrefix(id) + image + "/"
	// ExportSuspended writes the layer, then the memory: each goes to
	// its blob through a pipe, both uploads under way at once.
	layerR, layerW := io.Pipe()
	memR, memW := io.Pipe()
	counted := &counter{}
	puts := make(chan error, 2)
	go func() { puts <- m.images.Put(ctx, prefix+"layer.tar", io.TeeReader(layerR, counted)) }()
	go func() { puts <- m.images.Put(ctx, prefix+"memory.tar", io.TeeReader(memR, counted)) }()
	kept, err := mover.ExportSuspended(ctx, backend.Handle{ID: id, Backend: rec.Backend, State: rec.Handle}, layerW, memW)
	layerW.CloseWithError(err)
	memW.CloseWithError(err)
	err = errors.Join(err, <-puts, <-puts)
	if err == nil && !kept {
		err = m.images.Delete(ctx, prefix+"memory.tar")
	}
	if err == nil {
		err = m.store.SetImage(ctx, id, m.node, image)
	}
	if err != nil {
		return "", 0, errors.Join(err, m.dropImages(context.WithoutCancel(ctx), id, ""))
	}
	return image, counted.n.Load(), m.dropImages(ctx, id, image)
}

// counter counts what goes through it, from both parts of an image at
// once (the uploads run side by side).
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// dropImages deletes sandbox id's images but keep ("": all of them).
func (m *Manager) dropImages(ctx context.Context, id, keep string) error {
	if m.images == nil {
		return nil
	}
	blobs, err := m.images.List(ctx, imagePrefix(id))
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range blobs {
		if keep != "" && strings.HasPrefix(b.Name, imagePrefix(id)+keep+"/") {
			continue
		}
		errs = append(errs, m.images.Delete(ctx, b.Name))
	}
	return errors.Join(errs...)
}

// importImage makes suspended sandbox rec, moved here from another node,
// from its image: nil when it is this node's own already. The caller
// holds its lock.
func (m *Manager) importImage(ctx context.Context, rec *store.Sandbox, spec backend.Spec) (*backend.Handle, error) {
	mover, ok := m.backends[rec.Backend].(backend.Mover)
	if !ok || mover.Has(rec.ID) {
		return nil, nil
	}
	if rec.Image == "" || m.images == nil {
		return nil, errdefs.Unavailable("sandbox %s has no files on this node (%s) and no image in a shared image store to resume from", rec.ID, m.node)
	}
	began := time.Now()
	prefix := imagePrefix(rec.ID) + rec.Image + "/"
	layer, err := m.images.Get(ctx, prefix+"layer.tar")
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: its image's layer: %w", rec.ID, err)
	}
	defer layer.Close()
	var memory io.Reader
	switch mem, err := m.images.Get(ctx, prefix+"memory.tar"); {
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

// forgetImage drops sandbox id's image once it runs again: its files are
// no longer the image's.
func (m *Manager) forgetImage(rec *store.Sandbox) {
	if rec.Image == "" || m.images == nil {
		return
	}
	m.reaps.Add(1)
	go func() {
		defer m.reaps.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := errors.Join(m.store.SetImage(ctx, rec.ID, m.node, ""), m.dropImages(ctx, rec.ID, "")); err != nil {
			m.log.Warn("drop the image of a sandbox that runs again", attrSandbox, rec.ID, "error", err)
		}
	}()
}

// destroyImported removes what an import made, when its record could not
// say so.
func (m *Manager) destroyImported(ctx context.Context, h backend.Handle) error {
	be, ok := m.backends[h.Backend]
	if !ok {
		return nil
	}
	return be.Destroy(ctx, h)
}
