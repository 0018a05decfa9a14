// Package layerdiff compares what two overlayfs roots show, without
// mounting them: a sandbox's files now and at a checkpoint are each a
// writable layer (upper) over the same template (lower), so only what
// either upper holds can differ, and only that is read.
//
// The trees are the tenant's, read by the daemon as root: nothing here
// follows a symbolic link. Every open is openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS from the layer's top, and only regular files are
// read.
package layerdiff

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"
)

// A Root is the tree an overlay mount of Upper over Lower shows.
type Root struct{ Upper, Lower string }

// Change kinds.
const (
	Added   = "added"
	Changed = "changed"
	Removed = "removed"
)

// A Change is one path that differs between two roots.
type Change struct {
	Path string // in the sandbox: /home/user/notes.txt
	Kind string // Added, Changed or Removed
	Type string // file, dir, symlink or other: what it is after (before, if removed)
	Size int64  // a file's size after (before, if removed)
}

// MaxChanges bounds a diff: past it, Diff stops and says it did.
const MaxChanges = 10000

// ErrTooMany is a diff that stopped at MaxChanges.
var ErrTooMany = fmt.Errorf("more than %d paths changed", MaxChanges)

// resolve is how every open here resolves a path.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// layer is an open top of an upper or lower directory.
type layer struct{ fd int }

func openLayer(dir string) (layer, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return layer{-1}, fmt.Errorf("open %s: %w", dir, err)
	}
	return layer{fd}, nil
}

func (l layer) close() {
	if l.fd >= 0 {
		_ = unix.Close(l.fd)
	}
}

// open opens rel ("" for the top) beneath l, never through a link.
func (l layer) open(rel string, flags uint64) (int, error) {
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(l.fd, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: resolve})
}

// lstat is rel's own attributes (a link's, not its target's); ok false
// when there is nothing there or a parent is not a plain directory.
func (l layer) lstat(rel string) (st unix.Stat_t, ok bool, err error) {
	if l.fd < 0 {
		return st, false, nil
	}
	if rel == "" {
		return st, true, unix.Fstat(l.fd, &st)
	}
	dir, base := path.Split(rel)
	fd, err := l.open(strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return st, false, absent(err)
	}
	defer unix.Close(fd)
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, false, absent(err)
	}
	return st, true, nil
}

// absent turns "not there" (a missing path, a parent that is a file or a
// link) into no error.
func absent(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil
	}
	return err
}

// names lists directory rel of l; nothing when it is not one.
func (l layer) names(rel string) ([]string, error) {
	if l.fd < 0 {
		return nil, nil
	}
	fd, err := l.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, absent(err)
	}
	f := os.NewFile(uintptr(fd), rel) // #nosec G115 -- a file descriptor
	defer f.Close()
	return f.Readdirnames(-1)
}

// opaque reports whether directory rel of l hides what the lower layer
// has below it (overlayfs' trusted.overlay.opaque).
func (l layer) opaque(rel string) bool {
	fd, err := l.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var v [1]byte
	n, err := unix.Fgetxattr(fd, "trusted.overlay.opaque", v[:])
	return err == nil && n == 1 && v[0] == 'y'
}

func isWhiteout(st unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 }
func isDir(st unix.Stat_t) bool      { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// A view is an open Root.
type view struct{ upper, lower layer }

func openView(r Root) (view, error) {
	u, err := openLayer(r.Upper)
	if err != nil {
		return view{layer{-1}, layer{-1}}, err
	}
	l, err := openLayer(r.Lower)
	if err != nil {
		u.close()
		return view{layer{-1}, layer{-1}}, err
	}
	return view{u, l}, nil
}

func (v view) close() { v.upper.close(); v.lower.close() }

// An entry is what a view shows at a path, and which layer it is in.
type entry struct {
	st      unix.Stat_t
	inUpper bool
	// lowerBelow: a directory whose lower layer's directory shows through
	// (not opaque, not new over a file).
	lowerBelow bool
}

// lookup resolves rel as overlayfs does: the upper layer's entry unless
// it is a whiteout, else the lower's, unless a directory above in the
// upper layer is opaque or not a directory.
func (v view) lookup(rel string) (entry, bool, error) {
	upperOn, lowerOn := true, true
	var e entry
	parts := []string{""}
	if rel != "" {
		parts = strings.Split(rel, "/")
	}
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		ust, uok, err := v.upper.lstat(sub)
		if err != nil || !upperOn {
			uok = false
		}
		if err != nil {
			return e, false, err
		}
		lst, lok, err := v.lower.lstat(sub)
		if err != nil {
			return e, false, err
		}
		lok = lok && lowerOn
		switch {
		case uok && isWhiteout(ust):
			return e, false, nil
		case uok:
			e = entry{st: ust, inUpper: true}
			lowerOn = lowerOn && lok && isDir(lst) && isDir(ust) && !v.upper.opaque(sub)
			e.lowerBelow = lowerOn
		case lok:
			upperOn = false
			e = entry{st: lst, lowerBelow: isDir(lst)}
		default:
			return e, false, nil
		}
		if i < len(parts)-1 && !isDir(e.st) {
			return e, false, nil
		}
	}
	return e, true, nil
}

// children lists what directory rel of the view holds.
func (v view) children(rel string, e entry) ([]string, error) {
	var names []string
	if e.inUpper {
		up, err := v.upper.names(rel)
		if err != nil {
			return nil, err
		}
		names = up
	}
	if e.lowerBelow {
		low, err := v.lower.names(rel)
		if err != nil {
			return nil, err
		}
		names = append(names, low...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Diff lists what differs between before and after, by path. Past
// MaxChanges it returns those and ErrTooMany.
func Diff(before, after Root) ([]Change, error) {
	a, err := openView(before)
	if err != nil {
		return nil, err
	}
	defer a.close()
	b, err := openView(after)
	if err != nil {
		return nil, err
	}
	defer b.close()
	d := differ{a: a, b: b, touched: map[string]bool{}}
	for _, v := range []view{a, b} {
		if err := d.touch(v.upper, ""); err != nil {
			return nil, err
		}
	}
	ea, _, err := a.lookup("")
	if err != nil {
		return nil, err
	}
	eb, _, err := b.lookup("")
	if err != nil {
		return nil, err
	}
	err = d.dir("", ea, eb)
	return d.out, err
}

type differ struct {
	a, b    view
	touched map[string]bool // every path either upper layer holds
	out     []Change
}

// touch marks every path below rel of upper.
func (d *differ) touch(upper layer, rel string) error {
	names, err := upper.names(rel)
	if err != nil {
		return err
	}
	for _, n := range names {
		sub := path.Join(rel, n)
		d.touched[sub] = true
		if st, ok, err := upper.lstat(sub); err != nil {
			return err
		} else if ok && isDir(st) {
			if err := d.touch(upper, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *differ) add(rel, kind string, st unix.Stat_t) error {
	if len(d.out) >= MaxChanges {
		return ErrTooMany
	}
	c := Change{Path: "/" + rel, Kind: kind, Type: typeOf(st)}
	if c.Type == "file" {
		c.Size = st.Size
	}
	d.out = append(d.out, c)
	return nil
}

func typeOf(st unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// dir compares directory rel, a directory in both views. What neither
// upper layer holds is the lower's in both, the same, unless one view
// hides the lower's directory (opaque) and the other does not.
func (d *differ) dir(rel string, ea, eb entry) error {
	lowerSame := ea.lowerBelow == eb.lowerBelow
	na, err := d.a.children(rel, ea)
	if err != nil {
		return err
	}
	nb, err := d.b.children(rel, eb)
	if err != nil {
		return err
	}
	names := slices.Compact(slices.Sorted(slices.Values(append(na, nb...))))
	for _, n := range names {
		sub := path.Join(rel, n)
		if lowerSame && !d.touched[sub] {
			continue
		}
		ca, oka, err := d.a.lookup(sub)
		if err != nil {
			return err
		}
		cb, okb, err := d.b.lookup(sub)
		if err != nil {
			return err
		}
		if err := d.entry(sub, ca, oka, cb, okb); err != nil {
			return err
		}
	}
	return nil
}

// entry compares path rel as each view has it (ok: it has one).
func (d *differ) entry(rel string, ea entry, oka bool, eb entry, okb bool) error {
	switch {
	case !oka && !okb:
		return nil
	case !okb:
		return d.tree(d.a, rel, ea, Removed)
	case !oka:
		return d.tree(d.b, rel, eb, Added)
	case ea.st.Mode&unix.S_IFMT != eb.st.Mode&unix.S_IFMT:
		// A file became a directory, or the other way: the old goes, the
		// new comes.
		if err := d.tree(d.a, rel, ea, Removed); err != nil {
			return err
		}
		return d.tree(d.b, rel, eb, Added)
	}
	same, err := d.same(rel, ea, eb)
	if err != nil {
		return err
	}
	if !same {
		if err := d.add(rel, Changed, eb.st); err != nil {
			return err
		}
	}
	if isDir(ea.st) {
		return d.dir(rel, ea, eb)
	}
	return nil
}

// tree reports rel and everything below it in v as kind.
func (d *differ) tree(v view, rel string, e entry, kind string) error {
	if err := d.add(rel, kind, e.st); err != nil {
		return err
	}
	if !isDir(e.st) {
		return nil
	}
	names, err := v.children(rel, e)
	if err != nil {
		return err
	}
	for _, n := range names {
		sub := path.Join(rel, n)
		c, ok, err := v.lookup(sub)
		if err != nil {
			return err
		}
		if ok {
			if err := d.tree(v, sub, c, kind); err != nil {
				return err
			}
		}
	}
	return nil
}

// same reports whether rel, of one type in both views, is the same: the
// same owner and mode, and the same content (a link's target, a file's
// bytes). A directory is the same whatever its children (they are
// compared on their own) and its times.
func (d *differ) same(rel string, ea, eb entry) (bool, error) {
	a, b := ea.st, eb.st
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid {
		return false, nil
	}
	switch a.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return true, nil
	case unix.S_IFLNK:
		ta, err := d.a.readlink(rel, ea)
		if err != nil {
			return false, err
		}
		tb, err := d.b.readlink(rel, eb)
		return ta == tb, err
	case unix.S_IFREG:
		if a.Size != b.Size {
			return false, nil
		}
		// A checkpoint is a snapshot: a file no one touched since has
		// the same inode, times and size on both sides.
		if ea.inUpper == eb.inUpper && a.Ino == b.Ino && a.Mtim == b.Mtim && a.Ctim == b.Ctim {
			return true, nil
		}
		return d.sameBytes(rel, ea, eb)
	}
	return a.Rdev == b.Rdev, nil
}

func (v view) layerOf(e entry) layer {
	if e.inUpper {
		return v.upper
	}
	return v.lower
}

func (v view) readlink(rel string, e entry) (string, error) {
	fd, err := v.layerOf(e).open(rel, unix.O_PATH)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// openFile opens regular file rel of the view for reading.
func (v view) openFile(rel string, e entry) (*os.File, error) {
	fd, err := v.layerOf(e).open(rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel) // #nosec G115 -- a file descriptor
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != e.st.Ino {
		f.Close()
		return nil, fmt.Errorf("/%s changed while it was read", rel)
	}
	return f, nil
}

func (d *differ) sameBytes(rel string, ea, eb entry) (bool, error) {
	fa, err := d.a.openFile(rel, ea)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := d.b.openFile(rel, eb)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, erra := io.ReadFull(fa, ba)
		nb, errb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if erra != nil || errb != nil {
			return errors.Is(erra, io.ErrUnexpectedEOF) || errors.Is(erra, io.EOF), nil
		}
	}
}

// ErrNotFile is a path that is not a regular file.
var ErrNotFile = errors.New("not a regular file")

// ReadFile reads regular file p (a path in the sandbox) as r shows it, up
// to max bytes: found false when there is nothing there, ErrNotFile when
// it is something else, and an error when it holds more than max.
func ReadFile(r Root, p string, max int64) (data []byte, found bool, err error) {
	v, err := openView(r)
	if err != nil {
		return nil, false, err
	}
	defer v.close()
	rel := strings.Trim(path.Clean("/"+p), "/")
	e, ok, err := v.lookup(rel)
	if err != nil || !ok {
		return nil, false, err
	}
	if e.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, true, fmt.Errorf("%s: %w", p, ErrNotFile)
	}
	if e.st.Size > max {
		return nil, true, fmt.Errorf("%s holds %d bytes, more than %d", p, e.st.Size, max)
	}
	f, err := v.openFile(rel, e)
	if err != nil {
		return nil, true, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if int64(len(data)) > max {
		return nil, true, fmt.Errorf("%s holds more than %d bytes", p, max)
	}
	return data, true, err
}

// Unified is the unified diff of file p from before to after ("" when
// they are the same), or a line saying they differ when either is not
// text (holds a NUL byte).
func Unified(p string, before, after []byte) string {
	if bytes.Equal(before, after) {
		return ""
	}
	if bytes.IndexByte(before, 0) >= 0 || bytes.IndexByte(after, 0) >= 0 {
		return fmt.Sprintf("Binary files a%s and b%s differ\n", p, p)
	}
	return udiff.Unified("a"+p, "b"+p, string(before), string(after))
}

// WriteTar writes to w a tar of each of paths (in the sandbox) as r shows
// it: a directory as itself alone, not what is below it; a path r does not
// have is left out. Owners are the sandbox's own ids: an entry of the
// upper layer is owned by upperBase plus its id on the host (a user
// namespace's), one of the lower by its id as it is. Only regular files'
// bytes are read, links never followed.
func WriteTar(r Root, paths []string, upperBase uint32, w io.Writer) error {
	v, err := openView(r)
	if err != nil {
		return err
	}
	defer v.close()
	tw := tar.NewWriter(w)
	for _, p := range paths {
		rel := strings.Trim(path.Clean("/"+p), "/")
		if rel == "" {
			continue
		}
		e, ok, err := v.lookup(rel)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		st := e.st
		uid, gid := st.Uid, st.Gid
		if e.inUpper {
			if uid < upperBase || gid < upperBase {
				return fmt.Errorf("/%s is owned by host ids %d:%d, outside the sandbox's", rel, uid, gid)
			}
			uid, gid = uid-upperBase, gid-upperBase
		}
		hdr := &tar.Header{Name: rel, Mode: int64(st.Mode & 0o7777), Uid: int(uid), Gid: int(gid),
			ModTime: time.Unix(st.Mtim.Unix()), Format: tar.FormatPAX}
		var f *os.File
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		case unix.S_IFLNK:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = v.readlink(rel, e); err != nil {
				return err
			}
		case unix.S_IFREG:
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
			if f, err = v.openFile(rel, e); err != nil {
				return err
			}
		default:
			continue // a fifo or socket: nothing a tool call needs back
		}
		err = tw.WriteHeader(hdr)
		if err == nil && f != nil {
			_, err = io.CopyN(tw, f, st.Size)
		}
		if f != nil {
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("archive /%s: %w", rel, err)
		}
	}
	return tw.Close()
}
