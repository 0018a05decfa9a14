package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// fsys is the file system the file tools act on, named by absolute paths
// as Files.abs makes them. In a sandbox it is the calling process's
// (osFS): the sandbox is the boundary. On the host (Files.Confined) it is
// Files.Dir alone (rootFS): there the caller is the daemon, as root, and
// a tool call, which a tenant's model chooses, must not reach
// /var/lib/hutch/api.key by an absolute path, by "..", or by a symlink or
// a hard link planted in the directory.
type fsys interface {
	Open(name string) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	ReadFile(name string) ([]byte, error)
	Mkdir(name string, perm fs.FileMode) error
	Lchown(name string, uid, gid int) error
	Rename(oldname, newname string) error
	Remove(name string) error
	RemoveAll(name string) error
	// CreateTemp makes a new file in dir, named from pattern as
	// os.CreateTemp names it, and returns it with its path.
	CreateTemp(dir, pattern string) (*os.File, string, error)
	// EvalSymlinks is the path name leads to through its symlinks.
	EvalSymlinks(name string) (string, error)
	WalkDir(root string, fn fs.WalkDirFunc) error
}

// osFS is the calling process's file system.
type osFS struct{}

// #nosec G304 -- any path of the sandbox, read inside it: the sandbox is the boundary
func (osFS) Open(name string) (*os.File, error)           { return os.Open(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) Lchown(name string, uid, gid int) error       { return os.Lchown(name, uid, gid) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) EvalSymlinks(name string) (string, error)     { return filepath.EvalSymlinks(name) }
func (osFS) WalkDir(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }

// #nosec G304 -- any path of the sandbox, read inside it: the sandbox is the boundary
func (osFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

func (osFS) CreateTemp(dir, pattern string) (*os.File, string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, "", err
	}
	return f, f.Name(), nil
}

// errOutside is a path that leads out of the confined directory.
var errOutside = errors.New("leads out of the tools directory")

// rootFS is the tree under dir, opened as an os.Root: every name is
// resolved by it, beneath its directory, following only the symlinks that
// stay in it (an absolute one too, when its target is in dir: do), so
// that nothing out of dir is read, written or removed, whatever is
// planted in it. Its files with more than
// one hard link are read only when they are uid's: a hard link to a file
// out of dir is that file.
type rootFS struct {
	root *os.Root
	dir  string // clean and absolute
	uid  int    // who the files the tools make belong to
}

// rel is name (absolute, in r.dir) relative to r.dir, as os.Root names it.
func (r rootFS) rel(op, name string) (string, error) {
	rel, err := filepath.Rel(r.dir, name)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", &fs.PathError{Op: op, Path: name, Err: errOutside}
	}
	return rel, nil
}

// escapes says whether err is os.Root's refusal of a name that leads out
// of its directory, or an absolute symlink, which it never follows. That
// error is not exported: its text is its only mark.
func escapes(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	const text = "path escapes from parent"
	return errors.Is(err, errOutside) ||
		errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == text ||
		errors.As(err, &le) && le.Err != nil && le.Err.Error() == text
}

// fail names the path of err as the caller gave it, and says errOutside
// of a name that leads out of the directory.
func (r rootFS) fail(name string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		if escapes(err) {
			return &fs.PathError{Op: pe.Op, Path: name, Err: errOutside}
		}
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	case errors.As(err, &le):
		if escapes(err) {
			return &fs.PathError{Op: le.Op, Path: name, Err: errOutside}
		}
		return &fs.PathError{Op: le.Op, Path: name, Err: le.Err}
	}
	return err
}

// do runs fn with name relative to r.dir. When os.Root refuses a symlink
// on the way, fn runs again with name's symlinks resolved (EvalSymlinks:
// all of them when follow, its directory's only when not), which also
// follows an absolute symlink whose target is in r.dir, as os.Root does
// not; what that resolution gives is still opened by os.Root, beneath
// r.dir.
func (r rootFS) do(op, name string, follow bool, fn func(rel string) error) error {
	rel, err := r.rel(op, name)
	if err != nil {
		return err
	}
	err = fn(rel)
	if !escapes(err) {
		return r.fail(name, err)
	}
	resolved, rerr := r.resolve(name, follow)
	if rerr != nil || resolved == name {
		return r.fail(name, err)
	}
	if rel, rerr = r.rel(op, resolved); rerr != nil {
		return r.fail(name, err)
	}
	return r.fail(name, fn(rel))
}

// resolve is name with its symlinks resolved, or only its directory's
// when not follow; a part of it that does not exist is left as it is.
func (r rootFS) resolve(name string, follow bool) (string, error) {
	if follow || name == r.dir {
		return r.evalSymlinks(name, true)
	}
	dir, err := r.evalSymlinks(filepath.Dir(name), true)
	return filepath.Join(dir, filepath.Base(name)), err
}

func (r rootFS) Open(name string) (*os.File, error) {
	var f *os.File
	err := r.do("open", name, true, func(rel string) (err error) {
		f, err = r.root.Open(rel)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := r.checkLinks(name, f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// checkLinks refuses an open regular file with several hard links that is
// not r.uid's: it may be a link to a file out of the directory, which its
// owner (root, say) could read and the tools' user could not.
func (r rootFS) checkLinks(name string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return r.fail(name, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || st.Nlink <= 1 || int(st.Uid) == r.uid {
		return nil
	}
	return &Error{Kind: KindBlockedByPolicy, Message: fmt.Sprintf(
		"%s has %d hard links and belongs to uid %d, not to uid %d, who tool calls on the host run as: it may be a link to a file out of the tools directory, and is not read", name, st.Nlink, st.Uid, r.uid)}
}

func (r rootFS) ReadFile(name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	return data, r.fail(name, err)
}

func (r rootFS) Stat(name string) (fi fs.FileInfo, err error) {
	return fi, r.do("stat", name, true, func(rel string) (err error) {
		fi, err = r.root.Stat(rel)
		return err
	})
}

func (r rootFS) Lstat(name string) (fi fs.FileInfo, err error) {
	return fi, r.do("lstat", name, false, func(rel string) (err error) {
		fi, err = r.root.Lstat(rel)
		return err
	})
}

func (r rootFS) Mkdir(name string, perm fs.FileMode) error {
	return r.do("mkdir", name, false, func(rel string) error { return r.root.Mkdir(rel, perm) })
}

func (r rootFS) Lchown(name string, uid, gid int) error {
	return r.do("lchown", name, false, func(rel string) error { return r.root.Lchown(rel, uid, gid) })
}

func (r rootFS) Rename(oldname, newname string) error {
	to, err := r.rel("rename", newname)
	if err != nil {
		return err
	}
	return r.do("rename", oldname, false, func(from string) error {
		err := r.root.Rename(from, to)
		if escapes(err) { // newname's directory, then
			if resolved, rerr := r.resolve(newname, false); rerr == nil {
				if rel, rerr := r.rel("rename", resolved); rerr == nil {
					err = r.root.Rename(from, rel)
				}
			}
		}
		return err
	})
}

func (r rootFS) Remove(name string) error {
	return r.do("remove", name, false, func(rel string) error { return r.root.Remove(rel) })
}

func (r rootFS) RemoveAll(name string) error {
	if name == r.dir {
		return &fs.PathError{Op: "removeall", Path: name, Err: fs.ErrInvalid}
	}
	return r.do("removeall", name, false, func(rel string) error { return r.root.RemoveAll(rel) })
}

func (r rootFS) CreateTemp(dir, pattern string) (f *os.File, name string, err error) {
	prefix, suffix, _ := strings.Cut(pattern, "*")
	for range 100 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, "", err
		}
		base := prefix + hex.EncodeToString(b[:]) + suffix
		err = r.do("createtemp", dir, true, func(rel string) (err error) {
			f, err = r.root.OpenFile(filepath.Join(rel, base), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			return err
		})
		if !errors.Is(err, fs.ErrExist) {
			return f, filepath.Join(dir, base), err
		}
	}
	return nil, "", &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, pattern), Err: fs.ErrExist}
}

// maxSymlinks bounds the symlinks EvalSymlinks follows, as Linux's
// MAXSYMLINKS does.
const maxSymlinks = 40

// EvalSymlinks resolves name's symlinks component by component, inside
// r.dir: one that climbs out of it, or is absolute and names a path out of
// it, is refused.
func (r rootFS) EvalSymlinks(name string) (string, error) { return r.evalSymlinks(name, false) }

// evalSymlinks is EvalSymlinks; when partial, what follows a missing
// part of name is kept as it is rather than refused.
func (r rootFS) evalSymlinks(name string, partial bool) (string, error) {
	rel, err := r.rel("evalsymlinks", name)
	if err != nil {
		return "", err
	}
	todo := strings.Split(filepath.ToSlash(rel), "/")
	done, links := ".", 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		next := path.Join(done, part)
		if part == "." || part == "" {
			continue
		}
		if part == ".." {
			if done == "." {
				return "", &fs.PathError{Op: "evalsymlinks", Path: name, Err: errOutside}
			}
			done = path.Dir(done)
			continue
		}
		fi, err := r.root.Lstat(filepath.FromSlash(next))
		if partial && errors.Is(err, fs.ErrNotExist) {
			done = path.Join(append([]string{next}, todo...)...)
			break
		}
		if err != nil {
			return "", r.fail(name, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "evalsymlinks", Path: name, Err: syscall.ELOOP}
		}
		target, err := r.root.Readlink(filepath.FromSlash(next))
		if err != nil {
			return "", r.fail(name, err)
		}
		if filepath.IsAbs(target) { // followed only when it names a path in r.dir
			if target, err = r.rel("evalsymlinks", filepath.Clean(target)); err != nil {
				return "", &fs.PathError{Op: "evalsymlinks", Path: name, Err: errOutside}
			}
			next = "."
		} else {
			next = path.Dir(next)
		}
		done, todo = next, append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	return filepath.Join(r.dir, filepath.FromSlash(done)), nil
}

// WalkDir walks the tree at root as filepath.WalkDir does, in r.dir:
// root itself may be reached through a symlink inside r.dir, no other
// symlink is followed.
func (r rootFS) WalkDir(root string, fn fs.WalkDirFunc) error {
	start := root // walked, its paths named as root's
	if rel, err := r.rel("walk", root); err == nil {
		if _, err := r.root.Stat(rel); escapes(err) {
			if resolved, err := r.resolve(root, true); err == nil {
				start = resolved
			}
		}
	}
	rel, err := r.rel("walk", start)
	if err != nil {
		return fn(root, nil, err)
	}
	return fs.WalkDir(r.root.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
		under, _ := filepath.Rel(rel, filepath.FromSlash(p))
		abs := filepath.Join(root, under)
		if err != nil {
			err = r.fail(abs, err)
		}
		return fn(abs, d, err)
	})
}
