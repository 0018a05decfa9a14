package rootfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A build's root is written by its sandboxes: by apt-get, by npm and the
// postinstall scripts of the packages it installs, by a Hutchfile's RUN
// lines. What they leave is the tenant's, symbolic links included, and the
// daemon's own steps on the root (adding the sandbox user, cleaning the
// package caches, …) run as host root. So they never reach a path of the
// root by its name on the host: they go through a rootDir, which opens
// every path beneath the root with openat2's RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS. A symbolic link anywhere on the way is refused
// (ELOOP), and a file is never opened, written or removed outside the root,
// whatever the root holds. (internal/runtime/oci's layer archives do the
// same; this is the template store's own copy, which does not depend on a
// backend.)
//
// Nothing runs in the root while the daemon's steps do (a step's sandbox
// is gone when its Runner returns), so what is checked stays so.

// rootDir is a build's root, opened for the daemon's steps on it.
type rootDir struct {
	fd   int
	path string // for messages
}

// openRoot opens the directory root, which the daemon made.
func openRoot(root string) (*rootDir, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	return &rootDir{fd: fd, path: root}, nil
}

func (r *rootDir) Close() error { return unix.Close(r.fd) }

// beneath is how every path of the root is resolved.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openAt opens rel (slash-separated, relative to the root; "." is the root)
// beneath dir, a descriptor of the root or of a directory in it. Never
// blocking: a planted FIFO does not hold the daemon up.
func (r *rootDir) openAt(dir int, rel string, flags int, mode uint32) (*os.File, error) {
	if flags&unix.O_CREAT == 0 {
		mode = 0 // openat2 takes a mode only to create
	}
	how := &unix.OpenHow{Flags: uint64(flags) | unix.O_CLOEXEC | unix.O_NONBLOCK, Mode: uint64(mode), Resolve: beneath} // #nosec G115 -- open flags
	fd, err := unix.Openat2(dir, rel, how)
	if err != nil {
		return nil, r.pathError("open", rel, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(r.path, rel)), nil // #nosec G115 -- a descriptor
}

// open opens rel beneath the root.
func (r *rootDir) open(rel string, flags int, mode uint32) (*os.File, error) {
	return r.openAt(r.fd, rel, flags, mode)
}

// pathError names rel in the root, and says plainly what a refused link
// means: the build's own files are at fault, not the daemon.
func (r *rootDir) pathError(op, rel string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return errdefs.InvalidArgument("the build's root has a symbolic link or a mount on the way to /%s, which the daemon does not follow", rel)
	}
	return &fs.PathError{Op: op, Path: filepath.Join(r.path, rel), Err: err}
}

// dir opens directory rel for reading its entries and calling *at on it.
func (r *rootDir) dir(rel string) (*os.File, error) {
	return r.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// isDir reports whether rel is a directory of the root, reached without
// a link.
func (r *rootDir) isDir(rel string) (bool, error) {
	d, err := r.dir(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, d.Close()
}

// isFile says whether rel is a regular file.
func (r *rootDir) isFile(rel string) (bool, error) {
	f, err := r.open(rel, unix.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular(), errors.Join(err, f.Close())
}

// readFile reads the regular file rel.
func (r *rootDir) readFile(rel string) ([]byte, error) {
	f, err := r.open(rel, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.Join(err, errdefs.InvalidArgument("the build's /%s is not a regular file", rel))
	}
	return readAll(f)
}

// writeFile makes rel a new file of data and mode perm, owned by root.
func (r *rootDir) writeFile(rel string, data []byte, perm os.FileMode) error {
	return r.writeFrom(rel, bytes.NewReader(data), perm)
}

// writeFrom makes rel a new file of what src holds, of mode perm, owned by
// root: written aside and renamed over what was there, so that no file the
// root had (which may be a hard link to another) is written in place.
func (r *rootDir) writeFrom(rel string, src io.Reader, perm os.FileMode) (err error) {
	parent, base := path.Split(rel)
	d, err := r.dir(orDefault(strings.TrimSuffix(parent, "/"), "."))
	if err != nil {
		return err
	}
	defer d.Close()
	dir := int(d.Fd()) // #nosec G115 -- a descriptor
	tmp := ".hutch-" + base + ".new"
	_ = unix.Unlinkat(dir, tmp, 0) // a leftover of ours, if any
	f, err := r.openAt(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()))
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	err = errors.Join(err, f.Chmod(perm), f.Close())
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, base)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0) // the error is what matters
		return r.pathError("write", rel, err)
	}
	return nil
}

// appendFile adds data to the end of the regular file rel, keeping its
// mode and owner (the account files).
func (r *rootDir) appendFile(rel string, data []byte, create bool) error {
	flags := unix.O_WRONLY | unix.O_APPEND
	if create {
		flags |= unix.O_CREAT
	}
	f, err := r.open(rel, flags, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return errors.Join(err, f.Close(), errdefs.InvalidArgument("the build's /%s is not a regular file", rel))
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// touch makes rel an empty file of mode perm unless it is there: a mount
// point.
func (r *rootDir) touch(rel string, perm os.FileMode) error {
	f, err := r.open(rel, unix.O_WRONLY|unix.O_CREAT, uint32(perm.Perm())) // #nosec G115
	if err != nil {
		return err
	}
	return f.Close()
}

// mkdirAll makes directory rel and its missing parents, of mode 0755.
func (r *rootDir) mkdirAll(rel string) error {
	cur := "."
	for _, part := range strings.Split(rel, "/") {
		d, err := r.dir(cur) // a link in the way is refused here
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(d.Fd()), part, 0o755) // #nosec G115 -- a descriptor
		err = errors.Join(ignore(err, unix.EEXIST), d.Close())
		if err != nil {
			return r.pathError("mkdir", path.Join(cur, part), err)
		}
		cur = path.Join(cur, part)
	}
	return nil
}

// symlink makes rel a symbolic link to target, unless rel is there.
// target is the root's to resolve, in its sandboxes, never the daemon's.
func (r *rootDir) symlink(target, rel string) error {
	parent, base := path.Split(rel)
	d, err := r.dir(orDefault(strings.TrimSuffix(parent, "/"), "."))
	if err != nil {
		return err
	}
	err = unix.Symlinkat(target, int(d.Fd()), base) // #nosec G115 -- a descriptor
	if err = errors.Join(ignore(err, unix.EEXIST), d.Close()); err != nil {
		return r.pathError("symlink", rel, err)
	}
	return nil
}

// setMode gives rel mode perm and owner uid:gid.
func (r *rootDir) setMode(rel string, perm os.FileMode, uid, gid int) error {
	f, err := r.open(rel, unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Chmod(perm), f.Chown(uid, gid), f.Close())
}

// glob lists the names in directory dir that match pattern (path.Match),
// with their types; a missing dir has none.
func (r *rootDir) glob(dir, pattern string) ([]fs.DirEntry, error) {
	d, err := r.dir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []fs.DirEntry
	for _, e := range entries {
		if ok, _ := path.Match(pattern, e.Name()); ok { // the patterns are ours
			out = append(out, e)
		}
	}
	return out, nil
}

// removeAll removes rel and, when it is a directory, what it holds; a
// symbolic link is removed, never followed. A missing rel is fine.
func (r *rootDir) removeAll(rel string) error {
	parent, base := path.Split(rel)
	d, err := r.dir(orDefault(strings.TrimSuffix(parent, "/"), "."))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := removeAt(int(d.Fd()), base); err != nil { // #nosec G115
		return r.pathError("remove", rel, err)
	}
	return nil
}

// removeAt removes name in directory dir, and what it holds, going down
// by descriptors only.
func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return err
	}
	sub := os.NewFile(uintptr(fd), name) // #nosec G115 -- a descriptor
	entries, err := sub.ReadDir(-1)
	for _, e := range entries {
		err = errors.Join(err, removeAt(fd, e.Name()))
	}
	if err = errors.Join(err, sub.Close()); err != nil {
		return err
	}
	return ignore(unix.Unlinkat(dir, name, unix.AT_REMOVEDIR), unix.ENOENT)
}

// ignore is err unless it is target.
func ignore(err error, target error) error {
	if errors.Is(err, target) {
		return nil
	}
	return err
}

// readAll reads f whole, up to a bound: the daemon reads the root's small
// files only (account files), and a planted one must not fill its memory.
func readAll(f *os.File) ([]byte, error) {
	const limit = 16 << 20
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && len(b) > limit {
		err = fmt.Errorf("%s: over %d bytes", f.Name(), limit)
	}
	return b, err
}
