package disk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Pool makes disks in a directory of its own and keeps a few of the default
// size ready, so that taking one costs a symlink.
//
// Layout: disk NAME is image NAME.img mounted at NAME/. empty.btrfs (or
// empty.ext4) is an empty filesystem of the default size, made by the first
// disk of that size and copied for the others. A disk given to a sandbox
// has an owner link, NAME.owner, pointing at the sandbox's link to the
// disk, which points back at the disk's root: NAME/cur on btrfs (see
// checkpoints.go), NAME/ on ext4. A disk whose owner link is missing or not
// pointed back at was never handed out, or its sandbox never got it (the
// daemon stopped in between): NewPool releases those.
//
// Disks are btrfs where the host can (the kernel has it, btrfs-progs is
// installed), for checkpoints; ext4 otherwise, and disks made as ext4
// before stay ext4.
type Pool struct {
	dir       string
	defaultMB int64
	ready     int
	log       *slog.Logger
	fs        string // "btrfs" or "ext4": what new disks are

	// cloneFails: this kernel refuses to mount a copy of a btrfs image
	// beside its original (same filesystem id; kernels before 6.7), so
	// each btrfs disk gets a mkfs of its own.
	cloneFails bool

	mu      sync.Mutex
	free    []Disk      // of defaultMB, mounted, owned by no one
	reusing int         // disks being emptied for free (see reuse)
	taken   []time.Time // when disks of defaultMB were taken, the last takeWindow's at least
	closed  bool        // Run has ended: free is released, not added to
	wake    chan struct{}

	emptyMu sync.Mutex
	empty   string // the empty image of defaultMB once made
}

// NewPool returns a pool making disks in dir, keeping ready disks of
// defaultMB made ahead once Run runs. It releases what an earlier pool in
// dir left unowned.
func NewPool(dir string, defaultMB int64, ready int, log *slog.Logger) (*Pool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create disk dir: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{dir: dir, defaultMB: defaultMB, ready: ready, log: log, fs: "ext4", wake: make(chan struct{}, 1)}
	if btrfsUsable() {
		p.fs = "btrfs"
	}
	// Made again by this pool: mkfs or the default size may differ.
	for _, name := range []string{"empty.ext4", "empty.btrfs"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove old empty image: %w", err)
		}
	}
	images, err := filepath.Glob(filepath.Join(dir, "*.img"))
	if err != nil {
		return nil, err
	}
	for _, img := range images {
		d := p.disk(strings.TrimSuffix(filepath.Base(img), ".img"))
		if p.owned(d) {
			continue
		}
		if err := p.release(d); err != nil {
			return nil, fmt.Errorf("release unowned disk: %w", err)
		}
	}
	return p, nil
}

// Filesystem is what new disks are: "btrfs" (checkpoints) or "ext4".
func (p *Pool) Filesystem() string { return p.fs }

// Probe reports why disks cannot be made on this host, or nil.
func (p *Pool) Probe() error {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return errors.New("mkfs.ext4 not found, needed for sandboxes' disks: apt-get install e2fsprogs")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("no loop devices, needed for sandboxes' disks: %w", err)
	}
	return nil
}

func (p *Pool) disk(name string) Disk {
	base := filepath.Join(p.dir, name)
	return Disk{Mount: base, Image: base + ".img"}
}

func ownerLink(d Disk) string { return d.Mount + ".owner" }

// root is where a sandbox's files go on d: its subvolume cur on btrfs,
// its top on ext4.
func root(d Disk) string {
	if cur := filepath.Join(d.Mount, curName); isBtrfs(d.Mount) {
		return cur
	}
	return d.Mount
}

// owned reports whether d's owner link points at a link back to d.
func (p *Pool) owned(d Disk) bool {
	link, err := os.Readlink(ownerLink(d))
	if err != nil {
		return false
	}
	back, err := os.Readlink(link)
	return err == nil && (back == d.Mount || back == filepath.Join(d.Mount, curName))
}

// The disks beyond ready the pool keeps of those released while
// sandboxes come and go (see reusable): as many as were taken in the last
// takeWindow, and at least reuseSpare; spareIdle is how long it keeps
// them once none is taken. Under a stream of creates and deletes, a pool
// of only ready disks would have each take refilled by a new disk at once,
// and the disks released next found it full: every sandbox would pay for a
// disk made and one released; a fixed few spares did the same under more
// clients than spares. A burst of deletes with no creates beside it keeps
// no more than the few.
const (
	reuseSpare = 6
	spareIdle  = 500 * time.Millisecond
)

var takeWindow = time.Second // a variable for tests, whose disks take longer to make

// Run keeps the pool filled until ctx ends, then releases the disks no one
// took; the spares beyond ready it releases once the pool is idle.
func (p *Pool) Run(ctx context.Context) error {
	for {
		p.mu.Lock()
		short := len(p.free)+p.reusing < p.ready
		var surplus []Disk
		var trim <-chan time.Time // when the spares' idle time is up
		if n := len(p.free) - p.ready; n > 0 {
			if idle := p.idle(time.Now()); idle >= spareIdle {
				surplus = slices.Clone(p.free[:n]) // the oldest
				p.free = slices.Delete(p.free, 0, n)
			} else {
				trim = time.After(spareIdle - idle)
			}
		}
		p.mu.Unlock()
		for _, d := range surplus {
			if err := p.release(d); err != nil {
				p.log.Error("release a spare disk of the pool", "error", err)
			}
		}
		if short {
			d, err := p.create(ctx, p.defaultMB)
			if err != nil {
				if ctx.Err() == nil {
					p.log.Error("make a disk for the pool", "error", err)
				}
			} else {
				p.mu.Lock()
				p.free = append(p.free, d)
				p.mu.Unlock()
				continue
			}
		}
		select {
		case <-ctx.Done():
			p.mu.Lock()
			free := p.free
			p.free, p.closed = nil, true
			p.mu.Unlock()
			var errs []error
			for _, d := range free {
				errs = append(errs, p.release(d))
			}
			return errors.Join(errs...)
		case <-p.wake:
		case <-trim:
		}
	}
}

// Take gives a disk of sizeMB to whoever makes link, a symlink to the disk's
// root that Take creates. The root is empty but for ext4's lost+found.
func (p *Pool) Take(ctx context.Context, sizeMB int64, link string) (Disk, error) {
	var d Disk
	if sizeMB == p.defaultMB {
		p.mu.Lock()
		if n := len(p.free); n > 0 {
			d, p.free = p.free[n-1], p.free[:n-1]
		}
		now := time.Now()
		p.taken = append(p.recentTakes(now), now)
		p.mu.Unlock()
		p.poke()
	}
	if d.Mount == "" {
		var err error
		if d, err = p.create(ctx, sizeMB); err != nil {
			return Disk{}, err
		}
	}
	// The owner link first: if the daemon stops before the second, the
	// next pool finds no link back and releases the disk.
	if err := os.Symlink(link, ownerLink(d)); err != nil {
		return Disk{}, errors.Join(fmt.Errorf("claim disk: %w", err), p.release(d))
	}
	if err := os.Symlink(root(d), link); err != nil {
		return Disk{}, errors.Join(fmt.Errorf("link disk: %w", err), p.release(d))
	}
	return d, nil
}

// poke wakes Run to look at the pool again.
func (p *Pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// linked is the disk link points at.
func (p *Pool) linked(link string) (Disk, error) {
	target, err := os.Readlink(link)
	if err != nil {
		return Disk{}, fmt.Errorf("read disk link: %w", err)
	}
	mount := target
	if filepath.Base(target) == curName {
		mount = filepath.Dir(target)
	}
	if filepath.Dir(mount) != p.dir {
		return Disk{}, fmt.Errorf("disk link %s points outside the disk dir: %s", link, target)
	}
	return p.disk(filepath.Base(mount)), nil
}

// Release releases the disk that link, made by Take, points at, and removes
// link. A missing link is fine: there is nothing to release.
func (p *Pool) Release(link string) error {
	d, err := p.linked(link)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.reusable(d) {
		return p.reuse(d, link)
	}
	if err := p.release(d); err != nil {
		return err
	}
	return removeLink(link)
}

// reuseMaxUsed is the most a released disk may hold to be emptied for the
// next sandbox rather than released: btrfs frees a deleted subvolume's
// blocks in the background, so that sandbox may find up to this much less
// room for a moment. An empty 2 GiB disk holds ~6 MiB.
const reuseMaxUsed = 32 << 20

// reusable reports whether d, just released, can serve the next sandbox:
// a btrfs disk of the default size, holding little, while the pool holds
// fewer than ready disks and its spares (a pool keeping none ready keeps
// no spares either). If so, it counts d as being emptied.
func (p *Pool) reusable(d Disk) bool {
	if p.fs != "btrfs" || !isBtrfs(d.Mount) {
		return false
	}
	if st, err := os.Stat(d.Image); err != nil || st.Size() != p.defaultMB<<20 {
		return false
	}
	if used, err := Used(d.Mount); err != nil || used > reuseMaxUsed {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	spares := max(reuseSpare, len(p.recentTakes(time.Now())))
	if p.closed || p.ready == 0 || len(p.free)+p.reusing >= p.ready+spares {
		return false
	}
	p.reusing++
	return true
}

// idle is how long before now the last disk of defaultMB was taken: a
// pool busy since keeps its spares. One whose takes are all forgotten
// (older than takeWindow, itself longer than spareIdle) is idle; p.mu is
// held.
func (p *Pool) idle(now time.Time) time.Duration {
	if n := len(p.taken); n > 0 {
		return now.Sub(p.taken[n-1])
	}
	return max(takeWindow, spareIdle)
}

// recentTakes returns the takes of the last takeWindow before now, those
// before dropped from p.taken; p.mu is held.
func (p *Pool) recentTakes(now time.Time) []time.Time {
	i := 0
	for i < len(p.taken) && now.Sub(p.taken[i]) > takeWindow {
		i++
	}
	p.taken = p.taken[i:]
	return p.taken
}

// reuse empties d, released by the sandbox that linked it at link, and
// puts it with the ready disks: a new image, loop device and mount (and
// the ~15 kernel threads of a btrfs mount) cost far more than deleting
// two subvolumes' worth. A disk that will not empty is released instead.
// The sandbox's link and the owner link go first: should the daemon stop
// halfway, the next pool finds the disk unowned and releases it.
func (p *Pool) reuse(d Disk, link string) error {
	err := errors.Join(removeLink(link), removeLink(ownerLink(d)))
	if err == nil {
		err = wipe(d)
	}
	p.mu.Lock()
	p.reusing--
	kept := err == nil && !p.closed // a pool that stopped meanwhile keeps none
	if kept {
		p.free = append(p.free, d)
	}
	p.mu.Unlock()
	if kept {
		p.poke() // spares beyond ready go once the pool is idle
	}
	if err != nil {
		p.log.Info("a released disk did not empty for the next sandbox; releasing it", "disk", d.Mount, "error", err)
	}
	if !kept {
		return p.release(d)
	}
	return nil
}

// removeLink removes a link; one already gone is fine.
func removeLink(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// wipe makes d as a new disk is: an empty subvolume cur and an empty
// directory checkpoints. Subvolumes are deleted whole, whatever they
// hold; one inside cur (a sandbox may make them) stops the delete, and
// anything at the top but those two fails the wipe.
func wipe(d Disk) error {
	cps := filepath.Join(d.Mount, checkpointsName)
	entries, err := os.ReadDir(cps)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if isSubvolume(filepath.Join(cps, e.Name())) { // a checkpoint
			err = deleteSubvolume(cps, e.Name())
		} else { // what its runtime kept beside it
			err = os.RemoveAll(filepath.Join(cps, e.Name()))
		}
		if err != nil {
			return err
		}
	}
	if err := deleteSubvolume(d.Mount, curName); err != nil {
		return err
	}
	top, err := os.ReadDir(d.Mount)
	if err != nil {
		return err
	}
	if len(top) != 1 || top[0].Name() != checkpointsName {
		return fmt.Errorf("the disk holds more than its checkpoints: %d entries", len(top))
	}
	return makeSubvolume(d.Mount, curName)
}

func (p *Pool) create(ctx context.Context, sizeMB int64) (Disk, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	d := p.disk(hex.EncodeToString(b[:]))
	mkfs := func(f *os.File) error { return p.mkfs(ctx, f.Name()) }
	p.mu.Lock()
	copies := sizeMB == p.defaultMB && !p.cloneFails
	p.mu.Unlock()
	if !copies {
		if err := create(d.Image, d.Mount, sizeMB, p.fs, mkfs); err != nil {
			return Disk{}, err
		}
	} else {
		empty, err := p.emptyImage(ctx)
		if err != nil {
			return Disk{}, err
		}
		defer empty.Close()
		err = create(d.Image, d.Mount, sizeMB, p.fs, func(f *os.File) error { return copySparse(f, empty) })
		if err != nil && p.fs == "btrfs" && errors.Is(err, errMount) {
			p.log.Info("this kernel does not mount copies of a btrfs image side by side (before Linux 6.7): each disk gets its own mkfs.btrfs", "error", err)
			p.mu.Lock()
			p.cloneFails = true
			p.mu.Unlock()
			err = create(d.Image, d.Mount, sizeMB, p.fs, mkfs)
		}
		if err != nil {
			return Disk{}, err
		}
	}
	if p.fs == "btrfs" {
		// The sandbox's files go in a subvolume, which checkpoints
		// snapshot; checkpoints go beside it.
		err := makeSubvolume(d.Mount, curName)
		if err == nil {
			err = os.Mkdir(filepath.Join(d.Mount, checkpointsName), 0o700)
		}
		if err != nil {
			return Disk{}, errors.Join(err, releaseDisk(d))
		}
	}
	return d, nil
}

// mkfs makes an empty filesystem of the pool's kind in image.
func (p *Pool) mkfs(ctx context.Context, image string) error {
	if p.fs == "btrfs" {
		return mkfsBtrfs(ctx, image)
	}
	return mkfsExt4(ctx, image)
}

// emptyImage opens the empty filesystem of the default size, making it
// first if need be. It is written under a temporary name and renamed, so
// that what has the name is whole.
func (p *Pool) emptyImage(ctx context.Context) (*os.File, error) {
	p.emptyMu.Lock()
	defer p.emptyMu.Unlock()
	if p.empty == "" {
		path := filepath.Join(p.dir, "empty."+p.fs)
		tmp := path + ".tmp"
		// #nosec G304 -- a path in the pool's own directory
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create empty disk image: %w", err)
		}
		err = f.Truncate(p.defaultMB << 20)
		f.Close()
		if err == nil {
			err = p.mkfs(ctx, tmp)
		}
		if err == nil {
			err = digHoles(tmp)
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			_ = os.Remove(tmp)
			return nil, fmt.Errorf("make empty disk image: %w", err)
		}
		p.empty = path
	}
	// #nosec G304 -- the pool's own image
	f, err := os.Open(p.empty)
	if err != nil {
		return nil, fmt.Errorf("open empty disk image: %w", err)
	}
	return f, nil
}

// release releases d and its owner link.
func (p *Pool) release(d Disk) error {
	if err := releaseDisk(d); err != nil {
		return err
	}
	return removeLink(ownerLink(d))
}

// Grow makes the disk link points at sizeMB large, while it is mounted and
// in use: its image grows (sparse), its loop device takes the new size,
// and its filesystem all of it. A disk shrinks not: a smaller size is
// refused, and so is growing an ext4 disk.
func (p *Pool) Grow(link string, sizeMB int64) error {
	d, err := p.linked(link)
	if err != nil {
		return err
	}
	if !isBtrfs(d.Mount) {
		return ErrNoGrowth
	}
	st, err := os.Stat(d.Image)
	if err != nil {
		return err
	}
	switch size := sizeMB << 20; {
	case size < st.Size():
		return fmt.Errorf("%w: it has %d MiB", ErrShrink, st.Size()>>20)
	case size == st.Size():
		return nil
	default:
		if err := os.Truncate(d.Image, size); err != nil {
			return fmt.Errorf("grow disk image: %w", err)
		}
	}
	loop, err := loopOf(d.Image)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(loop, os.O_RDWR, 0) // #nosec G304 -- the loop device of a disk Hutch made
	if err != nil {
		return err
	}
	err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0)
	f.Close()
	if err != nil {
		return fmt.Errorf("tell %s its new size: %w", loop, err)
	}
	return growBtrfs(d.Mount)
}

// ErrShrink is a disk asked to become smaller; ErrNoGrowth, an ext4 disk
// asked to grow.
var (
	ErrShrink   = errors.New("a disk cannot shrink")
	ErrNoGrowth = errors.New("the sandbox's disk is ext4, which does not grow while mounted here: new sandboxes get btrfs, which does")
)

// loopOf is the loop device backed by image.
func loopOf(image string) (string, error) {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		// #nosec G304 -- a sysfs path from a glob of fixed shape
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == image {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f))), nil
		}
	}
	return "", fmt.Errorf("no loop device backs %s", image)
}
