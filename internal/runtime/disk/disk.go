// Package disk gives each sandbox a writable layer of limited size: a
// filesystem of its own, a btrfs (or ext4) image on a loop device.
//
// Why an image: the limit must hold for everything a sandbox writes (/tmp
// included, which is part of its root), fail with ENOSPC inside it, and leave
// the host's disk and other sandboxes alone. A filesystem of its own gives
// that exactly, with no requirement on the host's filesystem (XFS project
// quotas need XFS with prjquota; overlayfs has no size option), and the same
// for runc and gVisor: gVisor keeps a sandbox's root writes in a file in the
// root's host directory, which is then on the image too.
//
// Images are sparse: a 2 GiB disk costs what its sandbox wrote, and space
// freed inside is given back (mounted with discard, the loop device punches
// holes). The host's disk is therefore overcommitted: the sizes are limits,
// not reservations.
//
// Making a disk takes a few milliseconds of work: the pool formats an
// empty image of the default size once and copies its few allocated blocks
// for each new disk, which is 2–3 times cheaper than running mkfs.ext4 each
// time; attaching and mounting it is the rest. That work still does not
// belong on create's path, so a Pool keeps disks of the default size made
// ahead. Nor is it cheap beside the rest of a sandbox's life: a btrfs
// mount starts ~15 kernel threads and its unmount ends them, so a disk a
// sandbox released holding little is emptied (its subvolumes deleted) and
// kept for the next one instead (see Pool.reuse).
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
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A Disk is a mounted filesystem of a fixed size.
type Disk struct {
	Mount string // where it is mounted
	Image string // its image file
}

// Used reports how many bytes the filesystem mounted at mount holds.
func Used(mount string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", mount, err)
	}
	// #nosec G115 -- block counts and sizes of a filesystem Hutch made are far below 2^63
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize), nil
}

// errMount marks a disk whose filesystem would not mount.
var errMount = errors.New("mount disk")

// create makes a disk of sizeMB: image file, a filesystem of type fs
// written into it by format, loop device, mount. On error it leaves
// nothing behind.
func create(image, mount string, sizeMB int64, fs string, format func(*os.File) error) (err error) {
	// #nosec G304 -- a path in the pool's own directory
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create disk image: %w", err)
	}
	defer f.Close() // the loop device holds its own reference
	defer func() {
		if err != nil {
			_ = os.Remove(image)
		}
	}()
	if err := f.Truncate(sizeMB << 20); err != nil {
		return fmt.Errorf("size disk image: %w", err)
	}
	if err := format(f); err != nil {
		return err
	}
	loop, err := attach(f)
	if err != nil {
		return err
	}
	// Autoclear detaches the device at its last close: that must come
	// after the mount, which holds it from then on.
	defer loop.Close()
	// #nosec G301 -- root of the writable layer; the overlay's upper dir inside decides what the sandbox sees
	if err := os.Mkdir(mount, 0o755); err != nil {
		return fmt.Errorf("create disk mount point: %w", err)
	}
	// ext4's noinit_itable: the image is sparse, so its inode tables
	// already read as zeros; the kernel need not zero them in the
	// background. Space freed inside is given back to the host's disk.
	options := "noinit_itable,discard"
	if fs == "btrfs" {
		options = "discard=async"
	}
	if err := unix.Mount(loop.Name(), mount, fs, unix.MS_NODEV|unix.MS_NOSUID|unix.MS_NOATIME, options); err != nil {
		_ = os.Remove(mount)
		return fmt.Errorf("%w %s: %w", errMount, fs, err)
	}
	return nil
}

// mkfsExt4 makes an empty ext4 filesystem in image. No space is reserved for
// root (-m 0): a sandbox gets the size it asked for. Inode tables and the
// journal are left for the kernel to initialise lazily, so that mkfs writes
// a few hundred KiB, not tens of MiB. One inode per 8 KiB: package trees
// are many small files.
func mkfsExt4(ctx context.Context, image string) error {
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-T", "default", "-m", "0", "-i", "8192",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", image)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// copySparse copies the allocated parts of src into dst, which is already
// as large as src and all hole: for an empty filesystem about 1 MiB of a
// 2 GiB image. Holes stay holes.
func copySparse(dst, src *os.File) error {
	in, out := int(src.Fd()), int(dst.Fd())
	var off int64
	for {
		start, err := unix.Seek(in, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // no data after off
		}
		if err != nil {
			return fmt.Errorf("find data in %s: %w", src.Name(), err)
		}
		end, err := unix.Seek(in, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("find hole in %s: %w", src.Name(), err)
		}
		for rd, wr := start, start; rd < end; {
			n, err := unix.CopyFileRange(in, &rd, out, &wr, int(end-rd), 0)
			if err != nil {
				return fmt.Errorf("copy %s: %w", src.Name(), err)
			}
			if n == 0 {
				return fmt.Errorf("copy %s: it shrank", src.Name())
			}
		}
		off = end
	}
}

// holeBlock is the unit digHoles looks at: a page, a filesystem block.
const holeBlock = 4096

// digHoles punches a hole in each block of zeros the file at path holds
// on disk, so that it is as sparse as its content. mkfs.btrfs writes
// zeros: its empty 2 GiB image held 4.2 MiB, of which 188 KiB were not
// zeros, and every disk copied it all (copySparse).
func digHoles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0) // #nosec G304 -- an image of the pool's own
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	buf := make([]byte, 1<<20)
	zeros := make([]byte, holeBlock)
	var off int64
	for {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return f.Sync()
		}
		if err != nil {
			return fmt.Errorf("find data in %s: %w", path, err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("find hole in %s: %w", path, err)
		}
		for at := start; at < end; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-at)], at)
			if n == 0 && err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
			for i := 0; i+holeBlock <= n; i += holeBlock {
				if bytes.Equal(buf[i:i+holeBlock], zeros) {
					if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, at+int64(i), holeBlock); err != nil {
						return fmt.Errorf("punch a hole in %s: %w", path, err)
					}
				}
			}
			at += int64(n)
		}
		off = end
	}
}

// attach binds image file f to a free loop device and returns the device,
// open. The device detaches itself at its last close (autoclear): once its
// filesystem is mounted, when that is unmounted, so an unmount is all
// releasing needs, even a lazy one.
func attach(f *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open loop control: %w", err)
	}
	defer ctl.Close()
	// The kernel names the same free device to everyone who asks until
	// one configures it: attaches go one at a time, the daemon's own (20
	// creates at once ran out of tries) and other Hutch processes' (the
	// tests' daemons, side by side, did), under an flock of the loop
	// control device, released with its close. Another program that
	// takes the device between asking and configuring it is asked around.
	for {
		err := unix.Flock(int(ctl.Fd()), unix.LOCK_EX)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return nil, fmt.Errorf("lock loop control: %w", err)
		}
	}
	for range 10 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := openLoop(dev)
		if err != nil {
			return nil, err
		}
		// Direct I/O: the sandbox's filesystem caches its pages already;
		// without it they would be cached twice, once more for the image.
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())} // #nosec G115 -- a file descriptor
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) {
			cfg.Info.Flags &^= unix.LO_FLAGS_DIRECT_IO // the host filesystem cannot
			err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
		}
		if err == nil {
			return loop, nil
		}
		loop.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("configure %s: %w", dev, err)
		}
	}
	return nil, fmt.Errorf("no free loop device after 10 tries")
}

// openLoop opens a loop device that LOOP_CTL_GET_FREE just made, waiting
// briefly for its device node to appear.
func openLoop(dev string) (*os.File, error) {
	deadline := time.Now().Add(time.Second)
	for {
		// #nosec G304 -- a loop device path built from a number
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err == nil || !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("open %s: %w", dev, err)
			}
			return f, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// releaseDisk unmounts the disk and removes its mount point and image. What is
// already gone is fine. A filesystem still in use (a process somewhere holds
// it) is detached lazily: its loop device goes when the last user does.
func releaseDisk(d Disk) error {
	if err := unmount(d.Mount); err != nil {
		return err
	}
	var errs []error
	for _, p := range []string{d.Mount, d.Image} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func unmount(path string) error {
	err := unix.Unmount(path, 0)
	switch {
	case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return nil // unmounted, or not a mount point (any more)
	case errors.Is(err, unix.EBUSY):
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
		return nil
	default:
		return fmt.Errorf("unmount %s: %w", path, err)
	}
}

// Settle bounds how long the kernel takes to detach an autoclear loop
// device after its last close: it queues the work, so the device may
// still show a moment after its disk was released.
const Settle = 5 * time.Second

// Left lists the image files of the attached loop devices that of says
// are of interest, waiting up to Settle for those the kernel is still
// detaching: what it returns stayed attached, a leak. For tests and
// checks that nothing leaked.
func Left(of func(image string) bool) []string {
	for deadline := time.Now().Add(Settle); ; time.Sleep(20 * time.Millisecond) {
		left := slices.DeleteFunc(Backing(), func(image string) bool { return !of(image) })
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// Backing lists the image files of every attached loop device, at once.
func Backing() []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		// #nosec G304 -- a sysfs path from a glob of fixed shape
		if b, err := os.ReadFile(f); err == nil {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}
