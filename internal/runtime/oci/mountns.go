package oci

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/mountinfo"
)

// The mount namespace runc starts a container from.
//
// A container's mount namespace starts as a copy of the one its runtime
// runs in, and runc reads and pivots away from all of it. On the host that
// is every sandbox's disk, root and router namespace, three mounts each:
// `runc run` of a container of nothing took 38 ms beside 22 mounts and 81–104
// ms beside 3,000, so each create paid for every sandbox already there.
//
// So runc starts each sandbox from a namespace of its own, copied from a
// start namespace: the host's as it was, less the mounts each sandbox has
// (loop disks, overlay roots, namespace files, idmapped clones, of this
// daemon or another). The sandbox's own mounts, its root and the idmapped
// clones under its directory, are cloned into it. The namespace ends with
// runc's process: the container keeps the copies it uses, and nothing
// stays on the host.
//
// This namespace is not a boundary: runc still makes the container's own
// namespaces and pivots into its root. It holds only what the host has,
// and never another sandbox's mounts, which a copy of the host's did while
// runc was starting.

// errNoStartNS is a kernel without the mount API start namespaces need
// (Linux 5.2+): the runtime starts from the host's namespace there.
var errNoStartNS = errors.New("no open_tree(2) on this kernel")

// startNSAge is how long a start namespace serves: it keeps the host's
// mounts of when it was made alive (one the host unmounts stays busy), and
// does not see the host's later ones.
const startNSAge = 10 * time.Minute

// startNS makes and keeps the start namespace.
type startNS struct {
	mu   sync.Mutex
	file *os.File // its /proc/thread-self/ns/mnt, which keeps it
	made time.Time
}

// current returns a descriptor of the start namespace, for the caller to
// close; it is made again when it is older than startNSAge.
func (s *startNS) current(keep []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil || time.Since(s.made) >= startNSAge {
		f, err := makeStartNS(keep)
		if err != nil {
			return -1, err
		}
		if s.file != nil {
			_ = s.file.Close()
		}
		s.file, s.made = f, time.Now()
	}
	return unix.Dup(int(s.file.Fd()))
}

// makeStartNS copies the host's mount namespace on a thread of its own,
// keeps it from the host's propagation both ways, leaves out each
// sandbox's mounts and returns it. What holds the root or a path in keep
// stays, whatever its kind.
func makeStartNS(keep []string) (*os.File, error) {
	type made struct {
		f   *os.File
		err error
	}
	done := make(chan made, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread goes with this goroutine
		f, err := func() (*os.File, error) {
			if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
				return nil, fmt.Errorf("unshare: %w", err)
			}
			// Private, before anything is unmounted here: an unmount
			// must not reach the host's peers.
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return nil, fmt.Errorf("make the start namespace private: %w", err)
			}
			mounts, err := mountinfo.Mounts()
			if err != nil {
				return nil, err
			}
			slices.Reverse(mounts) // the later mounted first
			for _, m := range mounts {
				if !perSandbox(m) || holds(m.Point, keep) {
					continue
				}
				// EINVAL, ENOENT: gone with one above it.
				if err := unix.Unmount(m.Point, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
					return nil, fmt.Errorf("leave %s out of the start namespace: %w", m.Point, err)
				}
			}
			return os.Open("/proc/thread-self/ns/mnt")
		}()
		done <- made{f, err}
	}()
	m := <-done
	return m.f, m.err
}

// perSandbox reports whether m is of a kind each sandbox has: a disk (a
// loop device), a root (overlayfs), a namespace file, an idmapped clone.
func perSandbox(m mountinfo.Mount) bool {
	return m.FSType == "overlay" || m.FSType == "nsfs" || strings.HasPrefix(m.Source, "/dev/loop") ||
		slices.Contains(strings.Split(m.Options, ","), "idmapped")
}

// holds reports whether a mount at point holds the root or a path in
// keep: a host whose own root or Hutch's directories are on an overlay or
// a loop device keeps them.
func holds(point string, keep []string) bool {
	if point == "/" {
		return true
	}
	return slices.ContainsFunc(keep, func(p string) bool { return p == point || strings.HasPrefix(p, point+"/") })
}

// start starts cmd in a mount namespace of its own, copied from the start
// namespace, with a clone of the host's mounts at and below dir at dir.
// The namespace ends with cmd's process (and those it leaves behind, the
// container's, which hold copies of it).
// keep names what the runtime needs besides: see makeStartNS.
func (s *startNS) start(cmd *exec.Cmd, dir string, keep []string) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if errors.Is(err, unix.ENOSYS) {
		return errNoStartNS
	}
	if err != nil {
		return fmt.Errorf("clone the mounts of %s: %w", dir, err)
	}
	defer unix.Close(tree) // once attached, the namespace holds it
	base, err := s.current(keep)
	if err != nil {
		return err
	}
	defer unix.Close(base)
	return onMountNSThread(base, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("copy the start namespace: %w", err)
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the mounts of %s: %w", dir, err)
		}
		// The child is forked from this thread, in its namespace.
		return cmd.Start()
	})
}
