package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices and mounts")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("needs mkfs.ext4 (apt-get install e2fsprogs)")
	}
}

// nothingLeft checks that no mount or loop device of dir is left.
func nothingLeft(t *testing.T, dir string) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), dir) {
		t.Errorf("mounts under %s left behind", dir)
	}
	for _, f := range Left(func(f string) bool { return strings.HasPrefix(f, dir) }) {
		t.Errorf("loop device left attached to %s", f)
	}
}

// filesystems runs test with a pool of each kind of disk the host can
// make: btrfs where it can (checkpoints), ext4 always.
func filesystems(t *testing.T, test func(t *testing.T, newPool func(dir string, ready int) (*Pool, error))) {
	for _, fs := range []string{"btrfs", "ext4"} {
		t.Run(fs, func(t *testing.T) {
			if fs == "btrfs" && !btrfsUsable() {
				t.Skip("needs btrfs in the kernel and mkfs.btrfs (apt-get install btrfs-progs)")
			}
			test(t, func(dir string, ready int) (*Pool, error) {
				p, err := NewPool(dir, 64, ready, nil)
				if p != nil {
					p.fs = fs
				}
				return p, err
			})
		})
	}
}

func TestDiskIsLimitedAndReleased(t *testing.T) {
	requireRoot(t)
	filesystems(t, testDiskIsLimitedAndReleased)
}

func testDiskIsLimitedAndReleased(t *testing.T, newPool func(string, int) (*Pool, error)) {
	dir := t.TempDir()
	pool, err := newPool(filepath.Join(dir, "disks"), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- pool.Run(ctx) }()
	t.Cleanup(func() { nothingLeft(t, dir) })
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("pool run: %v", err)
		}
	}()

	link := filepath.Join(dir, "disk")
	d, err := pool.Take(ctx, 64, link)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(Backing(), d.Image) {
		t.Errorf("no loop device backed by %s", d.Image)
	}
	// Copied from the empty image, holes and all.
	var st syscall.Stat_t
	if err := syscall.Stat(d.Image, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20 || st.Blocks*512 > 8<<20 {
		t.Errorf("image is %d bytes, %d allocated: want 64 MiB, sparse", st.Size, st.Blocks*512)
	}
	before, err := Used(link)
	if err != nil {
		t.Fatal(err)
	}
	// Fill it: the write past 64 MiB fails with ENOSPC.
	f, err := os.Create(filepath.Join(link, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var written int64
	for {
		n, err := f.Write(buf)
		written += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write: %v, want ENOSPC", err)
			}
			break
		}
		if written > 128<<20 {
			t.Fatal("wrote 128 MiB to a 64 MiB disk")
		}
	}
	f.Close()
	if written < 48<<20 {
		t.Errorf("only %d MiB fit on a 64 MiB disk", written>>20)
	}
	after, err := Used(link)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 48<<20 {
		t.Errorf("used went from %d to %d bytes after writing %d", before, after, written)
	}

	// The next disk of the default size is empty; another size is made on
	// the spot. Each is its own filesystem.
	same, other := filepath.Join(dir, "same"), filepath.Join(dir, "other")
	if _, err := pool.Take(ctx, 64, same); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Take(ctx, 128, other); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{same, other} {
		if used, err := Used(l); err != nil || used > 8<<20 {
			t.Errorf("a new disk uses %d bytes (%v)", used, err)
		}
		want := []string{}
		if pool.fs == "ext4" {
			want = []string{"lost+found"}
		}
		entries, err := os.ReadDir(l)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if err != nil || len(names) != len(want) || len(want) > 0 && names[0] != want[0] {
			t.Errorf("a new disk holds %v (%v), want %v", names, err, want)
		}
	}
	for _, l := range []string{link, same, other} {
		if err := pool.Release(l); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(l); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("link %s still there", l)
		}
		if err := pool.Release(l); err != nil {
			t.Errorf("second release: %v", err)
		}
	}
}

// A disk taken but whose link was never made (the daemon stopped in
// between) is released by the next pool; one with its link is kept.
func TestNewPoolReleasesUnownedDisks(t *testing.T) {
	requireRoot(t)
	filesystems(t, testNewPoolReleasesUnownedDisks)
}

func testNewPoolReleasesUnownedDisks(t *testing.T, newPool func(string, int) (*Pool, error)) {
	dir := t.TempDir()
	t.Cleanup(func() { nothingLeft(t, dir) })
	disks := filepath.Join(dir, "disks")
	first, err := newPool(disks, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kept := filepath.Join(dir, "kept")
	if _, err := first.Take(ctx, 64, kept); err != nil {
		t.Fatal(err)
	}
	lost := filepath.Join(dir, "lost")
	d, err := first.Take(ctx, 64, lost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lost); err != nil {
		t.Fatal(err)
	}

	second, err := newPool(disks, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Image); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unowned disk's image still there: %v", err)
	}
	if _, err := Used(kept); err != nil {
		t.Errorf("owned disk gone: %v", err)
	}
	if err := second.Release(kept); err != nil {
		t.Fatal(err)
	}
}

// takeDisk takes a disk of sizeMB from a pool of its own, released at the
// test's end, and checked then to have left nothing.
func takeDisk(t *testing.T, newPool func(string, int) (*Pool, error), sizeMB int64) (*Pool, string) {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { nothingLeft(t, dir) })
	pool, err := newPool(filepath.Join(dir, "disks"), 0)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "disk")
	if _, err := pool.Take(t.Context(), sizeMB, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Release(link); err != nil {
			t.Error(err)
		}
	})
	return pool, link
}

// A checkpoint of a btrfs disk keeps its files as they were; a rollback
// brings them back, the checkpoint staying for another; a deleted one is
// gone with what its runtime kept beside it. An ext4 disk has none.
func TestCheckpoints(t *testing.T) {
	requireRoot(t)
	filesystems(t, func(t *testing.T, newPool func(string, int) (*Pool, error)) {
		pool, link := takeDisk(t, newPool, 64)
		if pool.fs == "ext4" {
			if _, err := pool.Checkpoint(link, "c1"); !errors.Is(err, ErrNoCheckpoints) {
				t.Errorf("a checkpoint of an ext4 disk: %v, want ErrNoCheckpoints", err)
			}
			return
		}
		file := filepath.Join(link, "upper", "notes.txt")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte("first"), 0o644); err != nil {
			t.Fatal(err)
		}
		snap, err := pool.Checkpoint(link, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snap, "upper", "x"), nil, 0o644); err == nil {
			t.Error("a checkpoint can be written to")
		}
		if err := os.WriteFile(file, []byte("second"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(snap, "upper", "notes.txt")); string(got) != "first" {
			t.Errorf("the checkpoint holds %q, want first", got)
		}
		for range 2 { // twice from the same checkpoint
			if err := pool.Rollback(link, "c1"); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(file); string(got) != "first" {
				t.Errorf("after the rollback the file holds %q (%v), want first", got, err)
			}
			if err := os.WriteFile(file, []byte("third"), 0o644); err != nil {
				t.Errorf("the rolled back files cannot be written: %v", err)
			}
		}
		cps, err := pool.CheckpointsDir(link)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cps, "c1.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := pool.DeleteCheckpoint(link, "c1"); err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(cps); len(left) != 0 {
			t.Errorf("after the delete the checkpoints dir holds %v", left)
		}
		if err := pool.Rollback(link, "c1"); err == nil {
			t.Error("a rollback to a deleted checkpoint worked")
		}
		if got, _ := os.ReadFile(file); string(got) != "third" {
			t.Errorf("a failed rollback changed the file to %q", got)
		}
		for _, bad := range []string{"", "..", "a/b", "../../etc"} {
			if _, err := pool.Checkpoint(link, bad); err == nil {
				t.Errorf("checkpoint id %q accepted", bad)
			}
		}
	})
}

// A btrfs disk grows while mounted and written to; it does not shrink. An
// ext4 one does not grow.
func TestGrow(t *testing.T) {
	requireRoot(t)
	filesystems(t, func(t *testing.T, newPool func(string, int) (*Pool, error)) {
		pool, link := takeDisk(t, newPool, 128)
		if pool.fs == "ext4" {
			if err := pool.Grow(link, 256); !errors.Is(err, ErrNoGrowth) {
				t.Errorf("an ext4 disk grown: %v, want ErrNoGrowth", err)
			}
			return
		}
		size := func() int64 {
			var st syscall.Statfs_t
			if err := syscall.Statfs(link, &st); err != nil {
				t.Fatal(err)
			}
			return int64(st.Blocks) * st.Bsize
		}
		before := size()
		if err := pool.Grow(link, 512); err != nil {
			t.Fatal(err)
		}
		if after := size(); after < before+300<<20 {
			t.Errorf("the filesystem is %d MiB after growing to 512 MiB, was %d", after>>20, before>>20)
		}
		// 300 MiB fit now, which 128 MiB did not.
		f, err := os.Create(filepath.Join(link, "big"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		for i := range 300 {
			if _, err := f.Write(buf); err != nil {
				t.Fatalf("write MiB %d on the grown disk: %v", i, err)
			}
		}
		f.Close()
		if err := pool.Grow(link, 256); !errors.Is(err, ErrShrink) {
			t.Errorf("shrinking: %v, want ErrShrink", err)
		}
	})
}

// digHoles leaves a file's content as it was and its zeros unallocated.
func TestDigHoles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "image")
	content := make([]byte, 64*holeBlock) // zeros, written: allocated
	copy(content[5*holeBlock:], "data")
	copy(content[40*holeBlock+7:], "more")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	blocks := func() int64 {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	before := blocks()
	if err := digHoles(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("content changed (%v)", err)
	}
	if after := blocks(); after > 2*holeBlock || after >= before {
		t.Errorf("%d bytes allocated after (%d before), want the two blocks of data", after, before)
	}
}

// reusePool is a btrfs pool of 64 MiB disks keeping one ready, not run,
// in a directory of the test's, checked for leftovers at the end.
func reusePool(t *testing.T) (string, *Pool) {
	t.Helper()
	requireRoot(t)
	if !btrfsUsable() {
		t.Skip("needs btrfs in the kernel and mkfs.btrfs (apt-get install btrfs-progs)")
	}
	dir := t.TempDir()
	t.Cleanup(func() { nothingLeft(t, dir) })
	pool, err := NewPool(filepath.Join(dir, "disks"), 64, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir, pool
}

// A released btrfs disk of the default size that holds little serves the
// next sandbox emptied: its files, checkpoints and what their runtime kept
// are gone, its image and mount stay. One that holds much, one with a
// subvolume of the sandbox's own, and one the pool has no room for are
// released.
func TestReuse(t *testing.T) {
	dir, pool := reusePool(t)
	t.Cleanup(func() {
		for _, d := range pool.free {
			if err := pool.release(d); err != nil {
				t.Error(err)
			}
		}
	})
	take := func(name string) (Disk, string) {
		t.Helper()
		link := filepath.Join(dir, name)
		d, err := pool.Take(t.Context(), 64, link)
		if err != nil {
			t.Fatal(err)
		}
		return d, link
	}
	write := func(path string, size int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	first, link := take("a")
	write(filepath.Join(link, "upper", "secret"), 100)
	if _, err := pool.Checkpoint(link, "c1"); err != nil {
		t.Fatal(err)
	}
	cps, _ := pool.CheckpointsDir(link)
	write(filepath.Join(cps, "c1.memory", "pages"), 100)
	if err := pool.Release(link); err != nil {
		t.Fatal(err)
	}
	if len(pool.free) != 1 || pool.free[0] != first {
		t.Fatalf("after the release the pool's ready disks are %v, want the released one", pool.free)
	}
	for _, gone := range []string{link, ownerLink(first)} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	again, link := take("b")
	if again != first {
		t.Fatalf("the next sandbox got %v, not the emptied disk %v", again, first)
	}
	if files, err := os.ReadDir(link); err != nil || len(files) != 0 {
		t.Errorf("the emptied disk holds %v (%v)", files, err)
	}
	if files, err := os.ReadDir(cps); err != nil || len(files) != 0 {
		t.Errorf("the emptied disk's checkpoints dir holds %v (%v)", files, err)
	}

	// A subvolume of the sandbox's own: released.
	if err := makeSubvolume(link, "nested"); err != nil {
		t.Fatal(err)
	}
	if err := pool.Release(link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first.Image); !errors.Is(err, os.ErrNotExist) || len(pool.free) != 0 {
		t.Errorf("a disk with a subvolume inside was kept: image %v, ready disks %v", err, pool.free)
	}

	// Much written (and on the disk, not only in the page cache): released.
	full, link := take("c")
	write(filepath.Join(link, "big"), reuseMaxUsed+(8<<20))
	if f, err := os.Open(filepath.Join(link, "big")); err == nil {
		_ = f.Sync()
		f.Close()
	}
	if err := pool.Release(link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(full.Image); !errors.Is(err, os.ErrNotExist) || len(pool.free) != 0 {
		t.Errorf("a disk holding %d MiB was kept: image %v, ready disks %v", (reuseMaxUsed>>20)+8, err, pool.free)
	}

	// No room: the ready disks and the spares kept, the one more released
	// (taken long enough ago that the pool keeps the fewest spares).
	room := pool.ready + reuseSpare
	var disks []Disk
	var links []string
	for i := range room + 1 {
		d, l := take(fmt.Sprint("more", i))
		disks, links = append(disks, d), append(links, l)
	}
	pool.mu.Lock()
	pool.taken = nil
	pool.mu.Unlock()
	for _, l := range links {
		if err := pool.Release(l); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(pool.free, disks[:room]) {
		t.Errorf("the pool's ready disks are %v, want the first %d released: %v", pool.free, room, disks[:room])
	}
	if _, err := os.Stat(disks[room].Image); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a disk the pool had no room for was kept: %v", err)
	}
}

// A pool that took more disks lately than it keeps spares otherwise keeps
// as many of those released: each create of a stream under many clients
// finds one, with no disk made and none released.
func TestSparesFollowTakes(t *testing.T) {
	dir, pool := reusePool(t)
	t.Cleanup(func() {
		for _, d := range pool.free {
			if err := pool.release(d); err != nil {
				t.Error(err)
			}
		}
	})
	defer func(w time.Duration) { takeWindow = w }(takeWindow)
	takeWindow = time.Hour // the test's disks are slower to make than a daemon's
	n := pool.ready + reuseSpare + 3
	if disks := takeAndRelease(t, pool, dir, n); !slices.Equal(pool.free, disks) {
		t.Errorf("the pool kept %d of the %d disks it took and released, want all", len(pool.free), n)
	}
}

// takeAndRelease takes n disks of pool's default size (64 MiB), linked in
// dir, then releases them all; it returns them in that order.
func takeAndRelease(t *testing.T, pool *Pool, dir string, n int) []Disk {
	t.Helper()
	var disks []Disk
	var links []string
	for i := range n {
		link := filepath.Join(dir, fmt.Sprint(i))
		d, err := pool.Take(t.Context(), 64, link)
		if err != nil {
			t.Fatal(err)
		}
		disks, links = append(disks, d), append(links, link)
	}
	for _, l := range links {
		if err := pool.Release(l); err != nil {
			t.Fatal(err)
		}
	}
	return disks
}

// The spares a busy pool kept beyond its ready disks are released once no
// disk was taken for spareIdle, the oldest first; the ready ones stay.
func TestSparesReleased(t *testing.T) {
	dir, pool := reusePool(t)
	disks := takeAndRelease(t, pool, dir, 3)
	if len(pool.free) != 3 {
		t.Fatalf("the pool kept %d of 3 disks released, want all", len(pool.free))
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	// Run takes the spares from the pool, then releases them.
	released := func() bool {
		for _, d := range disks[:2] {
			if _, err := os.Stat(d.Image); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(10 * spareIdle)
	for {
		pool.mu.Lock()
		free := slices.Clone(pool.free)
		pool.mu.Unlock()
		if len(free) == pool.ready && released() {
			if free[0] != disks[2] {
				t.Errorf("the pool kept %v, want the disk released last, %v", free[0], disks[2])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s the pool keeps %d disks (want %d), the two oldest released: %v", 10*spareIdle, len(free), pool.ready, released())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A disk released after its pool stopped (a daemon's sandboxes deleted as
// it shuts down) is released whole, not kept for a pool that is gone.
func TestReuseAfterStop(t *testing.T) {
	dir, pool := reusePool(t)
	link := filepath.Join(dir, "a")
	d, err := pool.Take(t.Context(), 64, link)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := pool.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pool.Release(link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Image); !errors.Is(err, os.ErrNotExist) || len(pool.free) != 0 {
		t.Errorf("a disk released after the pool stopped was kept: image %v, ready disks %v", err, pool.free)
	}
}
