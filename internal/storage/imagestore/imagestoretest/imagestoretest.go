// Package imagestoretest is the conformance suite of imagestore.Store:
// every implementation (the directory, S3) runs it from its tests, so that
// the daemon cannot tell them apart. What is one implementation's own (a
// directory's symbolic links, S3's part sizes) stays in its tests.
package imagestoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/imagestore"
)

// Harness is what the suite needs of an implementation.
type Harness struct {
	// Open returns a new, empty store, closed by t.Cleanup. Tests run in
	// parallel, each with its own.
	Open func(t *testing.T) imagestore.Store
	// Leftovers lists what is left of Puts in s beneath the interface:
	// temporary files, unfinished uploads. The suite checks it is empty
	// after every Put that failed.
	Leftovers func(t *testing.T, s imagestore.Store) []string
	// PartSize is the size past which a Put is sent in parts (0: it never
	// is); the suite makes Puts fail after a part has been sent.
	PartSize int
}

// Run runs every test of the suite, as subtests of t.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"Empty", testEmpty},
		{"NotFound", testNotFound},
		{"Overwrite", testOverwrite},
		{"Delete", testDelete},
		{"List", testList},
		{"InvalidNames", testInvalidNames},
		{"FailedPutLeavesNothing", testFailedPut},
		{"CancelledPut", testCancelledPut},
		{"CancelledGet", testCancelledGet},
		{"ReadersSeeWholeBlobs", testWholeBlobs},
		{"Large", testLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	const name = "sandboxes/abc123def456/1/upper.tar.zst"
	want := []byte("a writable layer")
	before := time.Now().Add(-time.Minute) // servers' clocks and second-granular times
	put(t, s, name, want)
	if got := get(t, s, name); !bytes.Equal(got, want) {
		t.Errorf("Get = %q, want %q", got, want)
	}
	info, err := s.Stat(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != name || info.Size != int64(len(want)) || info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Errorf("Stat = %+v, want %s of %d bytes, modified about now", info, name, len(want))
	}
	// A name at the top, with no directory.
	put(t, s, "top", want)
	if got := get(t, s, "top"); !bytes.Equal(got, want) {
		t.Errorf("Get(top) = %q, want %q", got, want)
	}
}

func testEmpty(t *testing.T, h Harness) {
	s := h.Open(t)
	put(t, s, "empty", nil)
	if got := get(t, s, "empty"); len(got) != 0 {
		t.Errorf("Get of an empty blob = %d bytes", len(got))
	}
	if info, err := s.Stat(t.Context(), "empty"); err != nil || info.Size != 0 {
		t.Errorf("Stat of an empty blob = %+v, %v", info, err)
	}
}

func testNotFound(t *testing.T, h Harness) {
	s := h.Open(t)
	put(t, s, "a/b/c", []byte("x"))
	// Absent, a directory of names, and a path through a blob.
	for _, name := range []string{"nothing", "a/b", "a/b/c/d", "a/b/cc"} {
		if r, err := s.Get(t.Context(), name); !errors.Is(err, errdefs.ErrNotFound) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Get(%s) = %v, want ErrNotFound", name, err)
		}
		if _, err := s.Stat(t.Context(), name); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Stat(%s) = %v, want ErrNotFound", name, err)
		}
		if err := s.Delete(t.Context(), name); err != nil {
			t.Errorf("Delete(%s) of no blob = %v, want nil", name, err)
		}
	}
	if got := get(t, s, "a/b/c"); string(got) != "x" {
		t.Errorf("a/b/c after the Deletes of other names = %q, want x", got)
	}
}

func testOverwrite(t *testing.T, h Harness) {
	s := h.Open(t)
	put(t, s, "a/b", bytes.Repeat([]byte("long "), 1000))
	put(t, s, "a/b", []byte("short"))
	if got := get(t, s, "a/b"); string(got) != "short" {
		t.Errorf("Get after an overwrite = %.20q (%d bytes), want short", got, len(got))
	}
	if info, err := s.Stat(t.Context(), "a/b"); err != nil || info.Size != 5 {
		t.Errorf("Stat after an overwrite = %+v, %v", info, err)
	}
	if infos := list(t, s, ""); len(infos) != 1 {
		t.Errorf("List after an overwrite = %v, want one blob", names(infos))
	}
}

func testDelete(t *testing.T, h Harness) {
	s := h.Open(t)
	put(t, s, "sandboxes/a/1/upper", []byte("1"))
	put(t, s, "sandboxes/a/2/upper", []byte("2"))
	if err := s.Delete(t.Context(), "sandboxes/a/1/upper"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "sandboxes/a/1/upper"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), "sandboxes/a/1/upper"); err != nil {
		t.Errorf("a second Delete = %v, want nil", err)
	}
	if got := names(list(t, s, "")); !slices.Equal(got, []string{"sandboxes/a/2/upper"}) {
		t.Errorf("List after Delete = %v", got)
	}
	// The name can be used again, and so can its deleted directory.
	put(t, s, "sandboxes/a/1/upper", []byte("again"))
	if got := get(t, s, "sandboxes/a/1/upper"); string(got) != "again" {
		t.Errorf("Get of a blob put again = %q", got)
	}
	for _, n := range []string{"sandboxes/a/1/upper", "sandboxes/a/2/upper"} {
		if err := s.Delete(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	put(t, s, "sandboxes/a/3/upper", []byte("3"))
	if got := get(t, s, "sandboxes/a/3/upper"); string(got) != "3" {
		t.Errorf("Get after every other blob was deleted = %q", got)
	}
}

func testList(t *testing.T, h Harness) {
	s := h.Open(t)
	// In List's order, bytes': "s1-b/" before "s1/".
	all := []string{"other/x", "sandboxes/s1-b/1/upper.tar.zst", "sandboxes/s1/1/memory.img",
		"sandboxes/s1/1/upper.tar.zst", "sandboxes/s1/2/upper.tar.zst", "sandboxes/s10/1/upper.tar.zst", "top"}
	for i, n := range slices.Backward(all) {
		put(t, s, n, bytes.Repeat([]byte{'x'}, i))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"sandboxes/s1/", all[2:5]},
		{"sandboxes/s1/1/", all[2:4]},
		{"sandboxes/s1", all[1:6]}, // a string prefix, as S3's
		{"sandboxes/s1/1/upper.tar.zst", all[3:4]},
		{"t", all[6:]},
		{"sandboxes/none/", nil},
		{"nothing/at/all/", nil},
		{"sandboxes/s1/1/upper.tar.zst/", nil}, // a blob is no directory
	}
	for _, tt := range tests {
		infos := list(t, s, tt.prefix)
		if got := names(infos); !slices.Equal(got, tt.want) {
			t.Errorf("List(%q) = %v, want %v", tt.prefix, got, tt.want)
		}
		for _, info := range infos {
			if want := int64(slices.Index(all, info.Name)); info.Size != want {
				t.Errorf("List(%q): %s has size %d, want %d", tt.prefix, info.Name, info.Size, want)
			}
		}
	}
}

func testInvalidNames(t *testing.T, h Harness) {
	s := h.Open(t)
	put(t, s, "a/b", []byte("x"))
	for _, name := range []string{"", "/abs", "../up", "a/../../up", "a/./b", "a//b", "a/", ".hidden",
		"a/.tmp-123", "a/b\x00", "a\\b", "sp ace", "ünï", "a/b?c", string(make([]byte, 600))} {
		if err := s.Put(t.Context(), name, bytes.NewReader([]byte("x"))); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Put(%q) = %v, want ErrInvalidArgument", name, err)
		}
		if r, err := s.Get(t.Context(), name); !errors.Is(err, errdefs.ErrInvalidArgument) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Get(%q) = %v, want ErrInvalidArgument", name, err)
		}
		if _, err := s.Stat(t.Context(), name); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidArgument", name, err)
		}
		if err := s.Delete(t.Context(), name); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidArgument", name, err)
		}
	}
	for _, prefix := range []string{"/", "/a", "..", "../", "a//", "a/../", ".tmp"} {
		if _, err := s.List(t.Context(), prefix); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("List(%q) = %v, want ErrInvalidArgument", prefix, err)
		}
	}
	if got := names(list(t, s, "")); !slices.Equal(got, []string{"a/b"}) {
		t.Errorf("after the invalid names the store has %v, want [a/b]", got)
	}
	checkLeftovers(t, h, s)
}

// testFailedPut: a Put whose reader fails leaves no blob, keeps the blob
// it would have replaced whole, and leaves nothing beneath.
func testFailedPut(t *testing.T, h Harness) {
	s := h.Open(t)
	old := []byte("the blob before")
	put(t, s, "replaced", old)
	sizes := []int{0, 1000}
	if h.PartSize > 0 {
		sizes = append(sizes, h.PartSize, h.PartSize+1000, 2*h.PartSize+1) // after one part and more are sent
	}
	for _, size := range sizes {
		for _, name := range []string{"new", "replaced"} {
			cause := errors.New("the archiver broke")
			err := s.Put(t.Context(), name, io.MultiReader(newPattern(int64(size), 1), failing{cause}))
			if !errors.Is(err, cause) {
				t.Errorf("Put(%s) failing after %d bytes = %v, want the reader's error", name, size, err)
			}
		}
		if _, err := s.Stat(t.Context(), "new"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("after a failed Put of %d bytes, Stat(new) = %v, want ErrNotFound", size, err)
		}
		if got := get(t, s, "replaced"); !bytes.Equal(got, old) {
			t.Errorf("after a failed Put of %d bytes, the blob it would replace is %d bytes, want the old one", size, len(got))
		}
		checkLeftovers(t, h, s)
	}
	if got := names(list(t, s, "")); !slices.Equal(got, []string{"replaced"}) {
		t.Errorf("after the failed Puts the store has %v", got)
	}
}

// testCancelledPut: a Put whose context ends while it reads (before any
// part is sent, and after) returns ctx's error and leaves nothing.
func testCancelledPut(t *testing.T, h Harness) {
	s := h.Open(t)
	sizes := []int64{0, 64 << 10}
	if h.PartSize > 0 {
		sizes = append(sizes, int64(h.PartSize)+64<<10)
	}
	for _, size := range sizes {
		ctx, cancel := context.WithCancel(t.Context())
		// An endless stream that cancels the Put once size bytes are read.
		r := &cancelAfter{r: newPattern(-1, 2), n: size, cancel: cancel}
		err := s.Put(ctx, "cancelled", r)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Put cancelled after %d bytes = %v, want context.Canceled", size, err)
		}
		if _, err := s.Stat(t.Context(), "cancelled"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("after a cancelled Put of %d bytes, Stat = %v, want ErrNotFound", size, err)
		}
		checkLeftovers(t, h, s)
	}
	// A context that has already ended.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "cancelled", bytes.NewReader([]byte("x"))); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Stat(t.Context(), "cancelled"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("after a Put with a cancelled context, Stat = %v, want ErrNotFound", err)
	}
	checkLeftovers(t, h, s)
}

// testCancelledGet: a Get's reader stops once its context ends.
func testCancelledGet(t *testing.T, h Harness) {
	s := h.Open(t)
	const size = 8 << 20
	if err := s.Put(t.Context(), "blob", newPattern(size, 3)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r, err := s.Get(ctx, "blob")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	cancel()
	n, err := io.Copy(io.Discard, r)
	if err == nil || n >= size-1000 {
		t.Errorf("after its context ended, the Get's reader read %d more bytes of %d, and %v; want an error before the end", n, size-1000, err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if r, err := s.Get(ctx, "blob"); err == nil {
		r.Close()
		t.Error("Get with a cancelled context succeeded")
	}
}

// testWholeBlobs: readers of a blob being replaced over and over get one
// version or another, whole, never a mix or a part.
func testWholeBlobs(t *testing.T, h Harness) {
	s := h.Open(t)
	versions := [][]byte{bytes.Repeat([]byte{'a'}, 300<<10), bytes.Repeat([]byte{'b'}, 200<<10)}
	put(t, s, "blob", versions[0])
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			if err := s.Put(ctx, "blob", bytes.NewReader(versions[i%2])); err != nil && ctx.Err() == nil {
				t.Errorf("Put: %v", err)
				return
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	for range 30 {
		r, err := s.Get(t.Context(), "blob")
		if err != nil {
			t.Fatalf("Get while the blob is replaced: %v", err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
			t.Fatalf("Get while the blob is replaced read %d bytes that are neither version", len(got))
		}
	}
}

// testLarge: 64 MiB and a byte, made as it is sent and checked by hash as
// it is read: no blob of this size is ever held in the test's memory.
func testLarge(t *testing.T, h Harness) {
	s := h.Open(t)
	const size = 64<<20 + 1
	src := newPattern(size, 4)
	sent := sha256.New()
	began := time.Now()
	if err := s.Put(t.Context(), "sandboxes/big/1/memory.img", io.TeeReader(src, sent)); err != nil {
		t.Fatal(err)
	}
	put := time.Since(began)
	info, err := s.Stat(t.Context(), "sandboxes/big/1/memory.img")
	if err != nil || info.Size != size {
		t.Fatalf("Stat = %+v, %v; want %d bytes", info, err, size)
	}
	began = time.Now()
	r, err := s.Get(t.Context(), "sandboxes/big/1/memory.img")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := sha256.New()
	n, err := io.Copy(got, r)
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
	if !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Fatal("the blob read back differs from the one put (sha256)")
	}
	t.Logf("%d MiB: Put %v, Get %v", size>>20, put.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

func put(t *testing.T, s imagestore.Store, name string, b []byte) {
	t.Helper()
	if err := s.Put(t.Context(), name, bytes.NewReader(b)); err != nil {
		t.Fatalf("Put(%s): %v", name, err)
	}
}

func get(t *testing.T, s imagestore.Store, name string) []byte {
	t.Helper()
	r, err := s.Get(t.Context(), name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

func list(t *testing.T, s imagestore.Store, prefix string) []imagestore.Info {
	t.Helper()
	infos, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return infos
}

func names(infos []imagestore.Info) []string {
	var ns []string
	for _, i := range infos {
		ns = append(ns, i.Name)
	}
	return ns
}

func checkLeftovers(t *testing.T, h Harness, s imagestore.Store) {
	t.Helper()
	if left := h.Leftovers(t, s); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// pattern is n bytes (endless when n < 0) of a seeded pseudo-random
// stream, made as they are read.
type pattern struct {
	n   int64
	rng *rand.ChaCha8
}

func newPattern(n int64, seed byte) *pattern {
	return &pattern{n: n, rng: rand.NewChaCha8([32]byte{seed})}
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	if p.n > 0 && int64(len(b)) > p.n {
		b = b[:p.n]
	}
	n, _ := p.rng.Read(b)
	if p.n > 0 {
		p.n -= int64(n)
	}
	return n, nil
}

// failing is a reader that fails.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// cancelAfter reads r and calls cancel once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(b []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
	}
	if int64(len(b)) > c.n && c.n > 0 {
		b = b[:c.n]
	}
	n, err := c.r.Read(b)
	c.n -= int64(n)
	return n, err
}
