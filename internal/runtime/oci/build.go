package oci

// What template builds need of a sandbox (backend.Builder): a listener on
// its loopback, through which a build step reaches the daemon's egress
// proxy, and its writable layer applied to the root being built.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// ListenIn listens on address inside the sandbox's network namespace. The
// socket is made by a thread that enters the namespace and returns: a
// socket belongs to the namespace it was made in for good, wherever the
// process that holds it is.
func (r *Runtime) ListenIn(ctx context.Context, h backend.Handle, address string) (net.Listener, error) {
	if r.cfg.OwnNetwork {
		return nil, errdefs.FailedPrecondition("sandbox %s runs on %s, whose network is inside its own kernel: the daemon cannot listen there", h.ID, r.cfg.Name)
	}
	st, err := r.state(ctx, h.ID)
	if err != nil {
		return nil, err
	}
	if st.Status != "running" || st.Pid <= 0 {
		return nil, errdefs.FailedPrecondition("sandbox %s is %s, not running", h.ID, st.Status)
	}
	return listenInNetns("/proc/"+strconv.Itoa(st.Pid)+"/ns/net", address)
}

// listenInNetns listens on address in the network namespace at nsPath.
func listenInNetns(nsPath, address string) (ln net.Listener, err error) {
	err = sandboxnet.InNetns(nsPath, func() error {
		ln, err = net.Listen("tcp", address)
		return err
	})
	return ln, err
}

// Export kills the sandbox's processes and applies its writable layer to
// dir. The root stays mounted until Destroy, which the caller calls next.
func (r *Runtime) Export(ctx context.Context, h backend.Handle, dir string) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	st, err := r.state(ctx, h.ID)
	if err != nil {
		return err
	}
	// What runs on could go on writing while the layer is read.
	if err := r.command(ctx, "kill", containerID(h.ID), "KILL").Run(); err != nil && st.Status == "running" {
		return fmt.Errorf("%s kill %s: %w", r.cfg.Name, h.ID, err)
	}
	if st.Pid > 0 {
		if err := waitExited(ctx, st.Pid); err != nil {
			return fmt.Errorf("sandbox %s: %w", h.ID, err)
		}
	}
	return r.applyLayer(h.ID, dir)
}

// applyLayer applies sandbox id's writable layer to dir, its ids shifted
// back from the sandbox's range.
func (r *Runtime) applyLayer(id, dir string) error {
	ids, hasIDs := mappingOf(r.dir(id))
	a := &layerApplier{upper: r.layout(id).upper, dst: dir, links: map[uint64]string{}}
	if hasIDs {
		a.base = int(ids.base)
	}
	if err := a.apply(); err != nil {
		return fmt.Errorf("apply the writable layer of sandbox %s: %w", id, err)
	}
	return nil
}

// Snapshot applies a running sandbox's writable layer to root while it is
// frozen (runc or runsc pause), so that nothing changes under the copy;
// with checkpoints (gVisor), its memory is saved then too.
func (r *Runtime) Snapshot(ctx context.Context, h backend.Handle, root, memory string) (saved bool, err error) {
	if !validID(h.ID) {
		return false, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	withMemory := memory != "" && r.cfg.Checkpoints
	err = r.whileFrozen(ctx, h, withMemory, func() error {
		if err := r.applyLayer(h.ID, root); err != nil {
			return err
		}
		if !withMemory {
			return nil
		}
		// Frozen still, so the memory saved matches the files copied.
		if err := r.checkpointRunning(ctx, h.ID, memory); err != nil {
			r.log.Warn("saving a snapshot's memory failed; the snapshot holds files only", "sandbox_id", h.ID, "error", err)
			return nil
		}
		saved = true
		return nil
	})
	return saved, err
}

// whileFrozen runs fn with sandbox h frozen (runc or runsc pause, unless
// paused already), so that nothing changes its files meanwhile, and thaws
// it after, whatever happened. forMemory: fn checkpoints its memory, for
// which the agent closes its listener first (it cannot while frozen) and
// listens again after.
func (r *Runtime) whileFrozen(ctx context.Context, h backend.Handle, forMemory bool, fn func() error) (err error) {
	st, err := r.state(ctx, h.ID)
	if err != nil {
		return err
	}
	// A daemon killed before the end leaves the sandbox frozen, or its
	// agent not listening: the mark has Recover set it running again.
	layer := r.layout(h.ID)
	if err := os.WriteFile(layer.snapshotting(), nil, 0o600); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.Remove(layer.snapshotting())) }()
	if forMemory {
		// Deferred first, so it runs last, once thawed.
		if st.Status == "paused" {
			if err := r.run(ctx, h.ID, "resume", containerID(h.ID)); err != nil {
				return err
			}
			st.Status = "running"
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			err = errors.Join(err, r.relisten(rctx, h))
		}()
		if err := r.unlisten(ctx, h.ID, layer); err != nil {
			return err
		}
	}
	if st.Status != "paused" {
		if err := r.Pause(ctx, h); err != nil {
			return err
		}
		defer func() {
			// Thawed whatever happened: the caller's sandbox runs on.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			err = errors.Join(err, r.Unpause(uctx, h))
		}()
	}
	return fn()
}

// layerApplier applies an overlayfs upper directory to a plain directory
// tree: what overlayfs would show with dst as its lower, made real in dst.
//
// In an upper layer a deleted file is a whiteout (a character device 0:0),
// and a directory made anew over one of the lower layer is marked opaque
// (the trusted.overlay.opaque xattr): what dst has there goes. Every other
// entry is new or changed, and whole: overlayfs copies a file up entirely
// before changing it, even for chmod.
//
// Extended attributes are not carried over: file capabilities set in a user
// namespace only mean something there.
type layerApplier struct {
	upper, dst string
	base       int               // the sandbox's host id of its root; 0 without a user namespace
	links      map[uint64]string // inodes of upper seen so far, to their dst path, for hard links
}

func (a *layerApplier) apply() error {
	return filepath.WalkDir(a.upper, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(a.upper, path)
		if err != nil || rel == "." {
			return err // the root's own attributes stay the template's
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		for _, attr := range []string{"trusted.overlay.redirect", "trusted.overlay.metacopy"} {
			if hasXattr(path, attr) {
				return fmt.Errorf("%s has %s: an overlay with redirect_dir or metacopy cannot be applied", rel, attr)
			}
		}
		target := filepath.Join(a.dst, rel)
		if st.Mode&unix.S_IFMT == unix.S_IFCHR {
			if st.Rdev == 0 { // a whiteout (made by overlayfs, owned by host root)
				return os.RemoveAll(target)
			}
			return nil // a device: sandboxes cannot make them
		}
		uid, gid, err := a.owner(st)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := a.dir(path, target, st.Mode, uid, gid); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			return nil
		case unix.S_IFREG:
			return a.file(path, target, st, uid, gid)
		case unix.S_IFLNK:
			dest, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := replace(target, func(tmp string) error { return os.Symlink(dest, tmp) }); err != nil {
				return err
			}
			return os.Lchown(target, uid, gid)
		case unix.S_IFIFO:
			return replace(target, func(tmp string) error {
				if err := unix.Mkfifo(tmp, st.Mode&0o777); err != nil {
					return err
				}
				return os.Lchown(tmp, uid, gid)
			})
		}
		return nil // sockets belong to processes that are gone
	})
}

// owner turns a layer file's host owner into the sandbox's own ids.
func (a *layerApplier) owner(st unix.Stat_t) (uid, gid int, err error) {
	uid, gid = int(st.Uid)-a.base, int(st.Gid)-a.base
	if uid < 0 || gid < 0 || (a.base > 0 && (uid >= idRange || gid >= idRange)) {
		return 0, 0, fmt.Errorf("owned by host ids %d:%d, outside the sandbox's", st.Uid, st.Gid)
	}
	return uid, gid, nil
}

// dir makes target a directory like upper's path; an opaque one loses what
// dst had in it.
func (a *layerApplier) dir(path, target string, mode uint32, uid, gid int) error {
	fi, err := os.Lstat(target)
	switch {
	case err == nil && fi.IsDir():
		if xattr(path, "trusted.overlay.opaque") == "y" {
			entries, err := os.ReadDir(target)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(target, e.Name())); err != nil {
					return err
				}
			}
		}
	case err == nil:
		if err := os.Remove(target); err != nil {
			return err
		}
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
	default:
		return err
	}
	if err := os.Lchown(target, uid, gid); err != nil {
		return err
	}
	return os.Chmod(target, goMode(mode)) // after chown, which clears setgid
}

// file copies upper's regular file at path to target, as a new inode (a
// hard link to one copied already when upper has them linked).
func (a *layerApplier) file(path, target string, st unix.Stat_t, uid, gid int) error {
	if st.Nlink > 1 {
		if first, ok := a.links[st.Ino]; ok {
			return replace(target, func(tmp string) error { return os.Link(first, tmp) })
		}
		a.links[st.Ino] = target
	}
	return replace(target, func(tmp string) error {
		// #nosec G304 -- a file of the sandbox's layer, opened by the daemon to copy it
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		// #nosec G304 -- a new file beside target in the root being built
		out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, src)
		if err == nil {
			err = out.Chown(uid, gid)
		}
		if err == nil {
			err = out.Chmod(goMode(st.Mode))
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		mtime := time.Unix(st.Mtim.Unix())
		return os.Chtimes(tmp, mtime, mtime)
	})
}

// replace puts a new entry at target: create makes it at a temporary name
// beside target, which is then renamed over what target was (a directory
// is removed first). The entry is new, so whatever shared target's inode
// by a hard link keeps the old contents.
func replace(target string, create func(tmp string) error) error {
	tmp := filepath.Join(filepath.Dir(target), ".hutch-new-"+filepath.Base(target))
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := create(tmp); err != nil {
		_ = os.Remove(tmp) // the error is what matters
		return err
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
		if err := os.RemoveAll(target); err != nil {
			return err
		}
	}
	return os.Rename(tmp, target)
}

// goMode turns a stat mode's permissions, setuid, setgid and sticky bits
// into Go's.
func goMode(m uint32) os.FileMode {
	out := os.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// xattr reads an extended attribute of path itself; "" when it has none.
func xattr(path, name string) string {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(path, name, buf)
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(buf[:n]), "\x00")
}

func hasXattr(path, name string) bool {
	_, err := unix.Lgetxattr(path, name, nil)
	return err == nil || errors.Is(err, syscall.ERANGE)
}
