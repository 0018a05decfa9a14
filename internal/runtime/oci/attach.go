package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Attach mounts binds into running sandbox h as its create would have
// (backend.Attacher): a warm pool's sandbox, made before anyone asked for
// a volume, takes the volumes of the create that claims it.
//
// Each bind's source is cloned on the host (open_tree), idmapped into the
// sandbox's user namespace as its create's binds are, then moved into the
// sandbox's mount namespace (move_mount) from a thread that joined it
// alone and is thrown away after. The mount point is found beneath the
// sandbox's root without following a link (openat2 RESOLVE_NO_SYMLINKS):
// a template cannot send it elsewhere, even inside the sandbox; missing
// directories are made, owned by the sandbox's root.
func (r *Runtime) Attach(ctx context.Context, h backend.Handle, binds []backend.Bind) error {
	if !r.cfg.LiveMounts {
		return errdefs.FailedPrecondition("runtime %s cannot mount into a running sandbox", r.cfg.Name)
	}
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	if len(binds) == 0 {
		return nil
	}
	layer := r.layout(h.ID)
	pid, err := readPid(layer.pidFile())
	if err != nil || !inSandbox(pid, h.ID) {
		return errdefs.FailedPrecondition("sandbox %s does not run: nothing to mount into", h.ID)
	}
	var userns *os.File
	owner := 0 // the host id of the sandbox's root
	if r.cfg.UserNamespace {
		ids, ok := mappingOf(layer.dir)
		if !ok {
			return fmt.Errorf("sandbox %s: its directory has lost its id range", h.ID)
		}
		if userns, err = r.ids.userns(ids); err != nil {
			return err
		}
		owner = ids.host(0)
	}
	var trees []int
	defer func() {
		for _, t := range trees {
			unix.Close(t)
		}
	}()
	for _, b := range binds {
		if !path.IsAbs(b.Destination) || path.Clean(b.Destination) != b.Destination || b.Destination == "/" {
			return errdefs.InvalidArgument("a bind's destination must be an absolute clean path, got %q", b.Destination)
		}
		tree, err := cloneIDMapped(b.Source, unix.AT_RECURSIVE, userns, !b.Writable)
		if err != nil {
			return err
		}
		trees = append(trees, tree)
	}
	return inMountNS(pid, func() error {
		root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // the sandbox's, from this thread
		if err != nil {
			return err
		}
		defer unix.Close(root)
		for i, b := range binds {
			dir, err := mkdirBeneath(root, b.Destination, owner)
			if err != nil {
				return fmt.Errorf("mount point %s: %w", b.Destination, err)
			}
			err = unix.MoveMount(trees[i], "", dir, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
			unix.Close(dir)
			if err != nil {
				return fmt.Errorf("mount %s at %s: %w", b.Source, b.Destination, err)
			}
		}
		return nil
	})
}

// inMountNS runs fn on an OS thread of its own that joined the mount
// namespace of process pid (its root and working directory are that
// namespace's root then). The thread is never given back to the Go
// runtime: it ends with fn.
func inMountNS(pid int, fn func() error) error {
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return fmt.Errorf("the sandbox's mount namespace: %w", err)
	}
	defer ns.Close()
	return onMountNSThread(int(ns.Fd()), fn)
}

// onMountNSThread runs fn on an OS thread of its own that joined the mount
// namespace ns, a descriptor. The thread ends with fn.
func onMountNSThread(ns int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread goes with this goroutine
		// A thread shares its root and working directory with the
		// others until it unshares them; only then may it change its
		// mount namespace.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("join a mount namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// mkdirBeneath opens directory p beneath directory root, making what is
// missing of it (mode 0755, owned by uid), following no link, and
// returns it as an O_PATH descriptor.
func mkdirBeneath(root int, p string, uid int) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}
	dir, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		next, err := unix.Openat2(dir, part, how)
		if errors.Is(err, unix.ENOENT) {
			err = unix.Mkdirat(dir, part, 0o755)
			if err == nil { // made here: the sandbox's root's
				err = unix.Fchownat(dir, part, uid, uid, unix.AT_SYMLINK_NOFOLLOW)
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat2(dir, part, how)
			}
		}
		unix.Close(dir)
		if err != nil {
			return -1, err
		}
		dir = next
	}
	return dir, nil
}
