package move

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/keylock"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/imagestore"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// records is a Store in memory.
type records struct {
	mu   sync.Mutex
	recs map[string]store.Sandbox
}

func (r *records) GetSandbox(_ context.Context, id string) (*store.Sandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	if !ok {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	return &rec, nil
}

func (r *records) SetImage(_ context.Context, id, node, image string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.recs[id]
	if !ok || rec.Node != node {
		return errdefs.NotFound("sandbox %s not found on node %s", id, node)
	}
	rec.Image = image
	r.recs[id] = rec
	return nil
}

func (r *records) image(id string) string {
	rec, _ := r.GetSandbox(context.Background(), id)
	return rec.Image
}

// mover is a backend.Mover whose suspended sandboxes are a layer and a
// memory image in memory.
type mover struct {
	*fake.Backend
	mu     sync.Mutex
	layers map[string][]byte
	memory map[string][]byte
}

func newMover(t *testing.T) *mover {
	return &mover{Backend: fake.New(t.TempDir()), layers: map[string][]byte{}, memory: map[string][]byte{}}
}

// Capabilities: the fake's, and it moves.
func (b *mover) Capabilities() backend.Capabilities {
	c := b.Backend.Capabilities()
	c.Move = b
	return c
}

func (b *mover) Has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.layers[id]
	return ok
}

func (b *mover) ExportSuspended(_ context.Context, h backend.Handle, layer, memory io.Writer) (bool, error) {
	b.mu.Lock()
	l, mem := b.layers[h.ID], b.memory[h.ID]
	b.mu.Unlock()
	if _, err := layer.Write(l); err != nil {
		return false, err
	}
	if mem == nil {
		return false, nil
	}
	_, err := memory.Write(mem)
	return true, err
}

func (b *mover) ImportSuspended(_ context.Context, spec backend.Spec, layer, memory io.Reader) (backend.Handle, error) {
	l, err := io.ReadAll(layer)
	if err != nil {
		return backend.Handle{}, err
	}
	var mem []byte
	if memory != nil {
		if mem, err = io.ReadAll(memory); err != nil {
			return backend.Handle{}, err
		}
	}
	b.mu.Lock()
	b.layers[spec.ID], b.memory[spec.ID] = l, mem
	b.mu.Unlock()
	return backend.Handle{ID: spec.ID, Backend: b.Name(), State: []byte("imported")}, nil
}

// kernel is a hook.Kernel whose background work the test waits for.
type kernel struct {
	locks keylock.Locks
	work  sync.WaitGroup
}

func (k *kernel) Lock(ctx context.Context, id string) (func(), error) { return k.locks.Lock(ctx, id) }

func (k *kernel) Peek(string) (hook.Sandbox, bool) { return nil, false }

func (k *kernel) Go(fn func()) {
	k.work.Add(1)
	go func() {
		defer k.work.Done()
		fn()
	}()
}

// node is one node's hook over the shared records and image store.
func node(t *testing.T, name string, recs *records, images imagestore.Store) (*Mover, *mover, *kernel) {
	be := newMover(t)
	m := New(Config{Store: recs, Images: images, Node: name, Backends: []backend.Backend{be}})
	k := &kernel{}
	m.Attach(k)
	return m, be, k
}

type sandbox string

func (s sandbox) ID() string               { return string(s) }
func (sandbox) Agent() *agentclient.Client { return nil }
func (sandbox) CommandEnv(context.Context, string, map[string]string) (map[string]string, error) {
	return nil, nil
}

// A suspended sandbox's image goes to the shared store; another node
// imports it at resume, with its memory; once it runs again, and once it
// is deleted, its images go.
func TestMoveBetweenNodes(t *testing.T) {
	ctx := t.Context()
	images, err := imagestore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	recs := &records{recs: map[string]store.Sandbox{}}
	a, beA, kA := node(t, "a", recs, images)
	b, beB, kB := node(t, "b", recs, images)
	recs.recs["sb1"] = store.Sandbox{ID: "sb1", Backend: beA.Name(), State: store.Suspended, Node: "a"}
	beA.layers["sb1"], beA.memory["sb1"] = []byte("files"), []byte("processes")

	// Its own node needs no import.
	if h, err := a.Import(ctx, new(recs.recs["sb1"]), backend.Spec{ID: "sb1"}); h != nil || err != nil {
		t.Fatalf("import on its own node = %v, %v; want nothing to do", h, err)
	}
	// Without an image, another node has nothing to resume it from.
	rec := recs.recs["sb1"]
	rec.Node = "b"
	if _, err := b.Import(ctx, &rec, backend.Spec{ID: "sb1"}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("import without an image: %v, want unavailable", err)
	}

	a.Suspended("sb1")
	kA.work.Wait()
	image := recs.image("sb1")
	if image == "" {
		t.Fatal("no image recorded after the upload")
	}
	blobs, err := images.List(ctx, "sandboxes/sb1/")
	if err != nil || len(blobs) != 2 {
		t.Fatalf("blobs after upload: %v, %v; want layer and memory", blobs, err)
	}

	// Moved to b (store.MoveSandbox changes its node), it is imported there.
	recs.mu.Lock()
	rec = recs.recs["sb1"]
	rec.Node = "b"
	recs.recs["sb1"] = rec
	recs.mu.Unlock()
	h, err := b.Import(ctx, &rec, backend.Spec{ID: "sb1"})
	if err != nil || h == nil || string(h.State) != "imported" {
		t.Fatalf("import on b = %v, %v", h, err)
	}
	if !bytes.Equal(beB.layers["sb1"], []byte("files")) || !bytes.Equal(beB.memory["sb1"], []byte("processes")) {
		t.Fatalf("imported %q and %q, want the layer and memory uploaded", beB.layers["sb1"], beB.memory["sb1"])
	}

	// Running again, its image goes.
	b.Resumed(ctx, sandbox("sb1"))
	kB.work.Wait()
	if got := recs.image("sb1"); got != "" {
		t.Fatalf("image %q kept after the sandbox ran again", got)
	}
	if blobs, err := images.List(ctx, "sandboxes/sb1/"); err != nil || len(blobs) != 0 {
		t.Fatalf("blobs after resume: %v, %v; want none", blobs, err)
	}
}

// An upload finds the sandbox as it is once it holds its lock: one woken
// meanwhile is not uploaded. A second upload replaces the first; a delete
// drops them all.
func TestUploadUnderLock(t *testing.T) {
	ctx := t.Context()
	images, err := imagestore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	recs := &records{recs: map[string]store.Sandbox{}}
	a, beA, k := node(t, "a", recs, images)
	recs.recs["sb1"] = store.Sandbox{ID: "sb1", Backend: beA.Name(), State: store.Suspended, Node: "a"}
	beA.layers["sb1"] = []byte("files") // no memory: files only

	unlock, err := k.Lock(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	a.Suspended("sb1")
	recs.mu.Lock()
	rec := recs.recs["sb1"]
	rec.State = store.Running // woken while the upload waited
	recs.recs["sb1"] = rec
	recs.mu.Unlock()
	unlock()
	k.work.Wait()
	if got := recs.image("sb1"); got != "" {
		t.Fatalf("a sandbox woken before its upload has image %q", got)
	}

	recs.mu.Lock()
	rec.State = store.Suspended
	recs.recs["sb1"] = rec
	recs.mu.Unlock()
	a.Suspended("sb1")
	k.work.Wait()
	first := recs.image("sb1")
	a.Suspended("sb1")
	k.work.Wait()
	second := recs.image("sb1")
	blobs, err := images.List(ctx, "sandboxes/sb1/")
	if err != nil || first == "" || second == first || len(blobs) != 1 || blobs[0].Name != "sandboxes/sb1/"+second+"/layer.tar" {
		t.Fatalf("after two uploads: images %q then %q, blobs %v (%v); want the second's layer alone", first, second, blobs, err)
	}
	if err := a.Removed(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	if blobs, err := images.List(ctx, "sandboxes/sb1/"); err != nil || len(blobs) != 0 {
		t.Fatalf("blobs after delete: %v, %v; want none", blobs, err)
	}
}
