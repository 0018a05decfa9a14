package disk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The three btrfs ioctls checkpoints need, from linux/btrfs.h: make a
// subvolume, snapshot one, delete one. x/sys/unix does not define them,
// and the libraries that do need cgo (containerd/btrfs) or are no longer
// kept; a system call each is cheaper than running btrfs-progs, which a
// checkpoint's few milliseconds cannot afford.
const (
	btrfsIocSubvolCreate  = 0x5000940e // _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	btrfsIocSnapDestroy   = 0x5000940f // _IOW(0x94, 15, struct btrfs_ioctl_vol_args)
	btrfsIocSnapCreateV2  = 0x50009417 // _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2)
	btrfsSubvolReadOnly   = 1 << 1     // BTRFS_SUBVOL_RDONLY
	btrfsSuperMagic       = 0x9123683e
	btrfsVolNameMax       = 4087
	btrfsSubvolNameMaxLen = 4039
	// BTRFS_FIRST_FREE_OBJECTID: the inode of a subvolume's top directory.
	btrfsFirstFreeObjectID = 256
)

// struct btrfs_ioctl_vol_args
type btrfsVolArgs struct {
	fd   int64
	name [btrfsVolNameMax + 1]byte
}

// struct btrfs_ioctl_vol_args_v2
type btrfsVolArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [btrfsSubvolNameMaxLen + 1]byte
}

// makeSubvolume makes subvolume name in directory dir.
func makeSubvolume(dir, name string) error {
	var args btrfsVolArgs
	copy(args.name[:], name)
	return volIoctl(dir, btrfsIocSubvolCreate, unsafe.Pointer(&args), "make subvolume "+name)
}

// deleteSubvolume deletes subvolume name of directory dir, whatever it
// holds. A missing one is fine.
func deleteSubvolume(dir, name string) error {
	if _, err := os.Lstat(dir + "/" + name); os.IsNotExist(err) {
		return nil
	}
	var args btrfsVolArgs
	copy(args.name[:], name)
	return volIoctl(dir, btrfsIocSnapDestroy, unsafe.Pointer(&args), "delete subvolume "+name)
}

// isSubvolume reports whether path is a subvolume's top: on btrfs, the
// directory whose inode is the first a subvolume gives out.
func isSubvolume(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Ino == btrfsFirstFreeObjectID
}

// snapshotSubvolume makes name in directory dir a snapshot of subvolume
// src: its files as they are, sharing their blocks until either side
// changes them. The kernel flushes what src has in the page cache first.
func snapshotSubvolume(src, dir, name string, readOnly bool) error {
	s, err := os.Open(src) // #nosec G304 -- a subvolume of a disk Hutch made
	if err != nil {
		return fmt.Errorf("open subvolume: %w", err)
	}
	defer s.Close()
	args := btrfsVolArgsV2{fd: int64(s.Fd())} // #nosec G115 -- a file descriptor
	if readOnly {
		args.flags = btrfsSubvolReadOnly
	}
	copy(args.name[:], name)
	return volIoctl(dir, btrfsIocSnapCreateV2, unsafe.Pointer(&args), "snapshot "+src+" as "+name)
}

func volIoctl(dir string, req uint, arg unsafe.Pointer, what string) error {
	d, err := os.Open(dir) // #nosec G304 -- a directory of a disk Hutch made
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer d.Close()
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, d.Fd(), uintptr(req), uintptr(arg)); errno != 0 {
		return fmt.Errorf("%s: %w", what, errno)
	}
	return nil
}

// isBtrfs reports whether path is on btrfs.
func isBtrfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == btrfsSuperMagic
}

// mkfsBtrfs makes an empty btrfs filesystem in image: one copy of data and
// metadata (the image is one file on one disk: a second copy protects
// from nothing), no discard of the sparse image. Below 1 GiB data and
// metadata share their chunks (--mixed), as btrfs advises: apart, a
// 64 MiB disk held 33 MiB of files, mixed 58.
func mkfsBtrfs(ctx context.Context, image string) error {
	args := []string{"-q", "-f", "-K", "-m", "single", "-d", "single"}
	if st, err := os.Stat(image); err == nil && st.Size() < 1<<30 {
		args = []string{"-q", "-f", "-K", "--mixed"}
	}
	// mkfs.btrfs first looks through the mounted filesystems for the
	// image, asking each loop device what it holds: one that another
	// disk's teardown detaches meanwhile fails the look ("cannot check
	// mount status … No such device or address"). That is not this
	// image's: it is asked again.
	for attempt := 1; ; attempt++ {
		cmd := exec.CommandContext(ctx, "mkfs.btrfs", append(args, image)...) // #nosec G204 -- fixed flags and a path of the pool's
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		if !strings.Contains(string(out), "cannot check mount status") || attempt == mkfsAttempts {
			return fmt.Errorf("mkfs.btrfs: %w: %s", err, strings.TrimSpace(string(out)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

// mkfsAttempts bounds how often mkfs.btrfs is run when its look at the
// mounted filesystems fails.
const mkfsAttempts = 5

// btrfsUsable reports whether disks can be btrfs here: the kernel has it
// and mkfs.btrfs is installed.
func btrfsUsable() bool {
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/filesystems")
	return err == nil && strings.Contains(string(b), "\tbtrfs\n")
}

// btrfsIocResize: _IOW(0x94, 3, struct btrfs_ioctl_vol_args).
const btrfsIocResize = 0x50009403

// growBtrfs has the btrfs filesystem mounted at mount take all of its
// device ("max").
func growBtrfs(mount string) error {
	var args btrfsVolArgs
	copy(args.name[:], "max")
	return volIoctl(mount, btrfsIocResize, unsafe.Pointer(&args), "resize the filesystem")
}
