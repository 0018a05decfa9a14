package oci

// A suspended sandbox's writable layer, and its memory image, as tars that
// another node can resume it from (see move.go).
//
// The layer is what overlayfs keeps in its upper directory: files,
// directories, symbolic and hard links, fifos; deleted files as whiteouts
// (character devices 0:0, overlayfs' own, owned by host root); directories
// made anew where the template has one as opaque (trusted.overlay.opaque).
// Whiteouts travel as tar character devices 0:0, extended attributes as
// PAX SCHILY.xattr records: trusted.overlay.* (overlayfs' own: opaque, and
// origin, impure and nlink, which it ignores on a node whose template is
// another file system), user.* and security.capability. Owners are the
// sandbox's own ids (0–65535), not the host ids of the range the sending
// node gave it, so that the receiving node can give it a range of its own.
// Layers of an overlay that redirects directories or copies metadata only
// (redirect_dir, metacopy) do not move: those entries lean on the lower
// layer of the node that made them.
//
// Reading a layer is reading untrusted input: it comes from a shared store
// that another node, or whoever holds the store's credentials, wrote.
// Names with ".." or a leading "/" are refused; every entry is then made
// relative to its directory, opened beneath the layer with openat2's
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, so that no name leaves the layer
// or goes through a symbolic link an earlier entry made. An entry that
// would replace another, a device other than a whiteout, an owner outside
// the sandbox's ids and a hard link to anything but a file the archive
// made are refused; extended attributes other than those above are
// dropped. Nothing else writes the layer meanwhile: it is in a directory
// of root's alone, mounted nowhere.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// paxXattr prefixes an extended attribute's name in a PAX record (GNU
// tar's and star's form).
const paxXattr = "SCHILY.xattr."

// File capabilities (security.capability, struct vfs_ns_cap_data): a v3
// one names the host id of the root of the user namespace it is for.
const (
	capXattr      = "security.capability"
	capV3Size     = 24
	capRevMask    = 0xff000000
	capRevision3  = 0x03000000
	capRootIDFrom = 20 // offset of the v3 root id
)

// owners turns a layer's host ids into the sandbox's own and back: by its
// id range in a user namespace, as they are without one.
type owners struct {
	ids    idMapping
	mapped bool
}

// ownersOf returns the owners of the sandbox whose directory is dir.
func ownersOf(dir string) owners {
	ids, ok := mappingOf(dir)
	return owners{ids: ids, mapped: ok}
}

// own returns the sandbox's id for host id h; false when h is not one of
// the sandbox's.
func (o owners) own(h uint32) (int, bool) {
	if !o.mapped {
		return int(h), true
	}
	if h < o.ids.base || h-o.ids.base >= idRange {
		return 0, false
	}
	return int(h - o.ids.base), true
}

// host returns the host id for the sandbox's id; false when id is not an
// id a sandbox has.
func (o owners) host(id int) (int, bool) {
	switch {
	case id < 0:
		return 0, false
	case o.mapped:
		return o.ids.host(id), id < idRange
	default:
		return id, id < math.MaxUint32 // (uid_t)-1 means "unchanged" to chown
	}
}

// writeLayer writes the writable layer upper to w as a tar, its owners the
// sandbox's own by o. Sockets are left out: their processes are gone.
func writeLayer(ctx context.Context, w io.Writer, upper string, o owners) error {
	tw := tar.NewWriter(w)
	links := map[uint64]string{} // inode → the first name of a file with several
	err := filepath.WalkDir(upper, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(upper, p)
		if err != nil {
			return err
		}
		if err := writeLayerEntry(tw, p, filepath.ToSlash(rel), o, links); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeLayerEntry writes the layer's file at p as rel ("." for the layer's
// top, the root directory of the sandbox's root).
func writeLayerEntry(tw *tar.Writer, p, rel string, o owners, links map[uint64]string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(st.Mode & 0o7777),
		ModTime: time.Unix(st.Mtim.Unix()),
		Format:  tar.FormatPAX, // the mtime's nanoseconds, xattrs, ids past 2^21
	}
	whiteout := false
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
	case unix.S_IFREG:
		if st.Nlink > 1 {
			if first, ok := links[st.Ino]; ok {
				// A link shares its file's owner, mode and xattrs.
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: rel, Linkname: first, Format: tar.FormatPAX})
			}
			links[st.Ino] = rel
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	case unix.S_IFLNK:
		dest, err := os.Readlink(p)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, dest
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			return nil // a device: sandboxes cannot make them
		}
		hdr.Typeflag, whiteout = tar.TypeChar, true
	default:
		return nil // sockets belong to processes that are gone
	}
	if !whiteout { // overlayfs makes whiteouts as host root, in no sandbox's range
		uid, uok := o.own(st.Uid)
		gid, gok := o.own(st.Gid)
		if !uok || !gok {
			return fmt.Errorf("owned by host ids %d:%d, outside the sandbox's", st.Uid, st.Gid)
		}
		hdr.Uid, hdr.Gid = uid, gid
	}
	xattrs, err := layerXattrs(p, o)
	if err != nil {
		return err
	}
	hdr.PAXRecords = xattrs
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size == 0 {
		return nil
	}
	return copyFileTo(tw, p, hdr.Size)
}

// copyFileTo writes size bytes of the file at p, not a symbolic link, to w.
func copyFileTo(w io.Writer, p string, size int64) error {
	// #nosec G304 -- a file of a writable layer Hutch walks, never a link followed
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.CopyN(w, f, size)
	return err
}

// layerXattrs returns the extended attributes of the layer's file at p
// that move with it, as PAX records.
func layerXattrs(p string, o owners) (map[string]string, error) {
	names, err := listXattrs(p)
	if err != nil {
		return nil, err
	}
	var records map[string]string
	for _, name := range names {
		if !movesXattr(name) {
			continue
		}
		if leansOnLower(name) {
			return nil, fmt.Errorf("has %s: a layer of an overlay with redirect_dir or metacopy cannot move", name)
		}
		v, err := getXattr(p, name)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s: %w", name, err)
		}
		if name == capXattr {
			var ok bool
			if v, ok = capRootID(v, o.own); !ok {
				continue // another namespace's: nothing in the sandbox
			}
		}
		if records == nil {
			records = map[string]string{}
		}
		records[paxXattr+name] = string(v)
	}
	return records, nil
}

// movesXattr says whether extended attribute name moves with a layer.
func movesXattr(name string) bool {
	return strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.") || name == capXattr
}

// leansOnLower says whether overlayfs' attribute name points into the
// lower layer of the node that set it.
func leansOnLower(name string) bool {
	return name == "trusted.overlay.redirect" || name == "trusted.overlay.metacopy"
}

// capRootID rewrites the root id of a v3 file capability by shift (the
// sandbox's id of a host id, or back); other revisions, which name no
// root, stay as they are. false: the root id has no counterpart.
func capRootID(v []byte, shift func(uint32) (int, bool)) ([]byte, bool) {
	if len(v) != capV3Size || binary.LittleEndian.Uint32(v)&capRevMask != capRevision3 {
		return v, true
	}
	root, ok := shift(binary.LittleEndian.Uint32(v[capRootIDFrom:]))
	if !ok {
		return nil, false
	}
	out := bytes.Clone(v)
	binary.LittleEndian.PutUint32(out[capRootIDFrom:], uint32(root)) // #nosec G115 -- an id checked by shift
	return out, true
}

// listXattrs lists the extended attributes of path itself.
func listXattrs(path string) ([]string, error) {
	for {
		n, err := unix.Llistxattr(path, nil)
		if err != nil || n == 0 {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = unix.Llistxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grown meanwhile
		}
		if err != nil {
			return nil, err
		}
		return strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00"), nil
	}
}

// getXattr reads extended attribute name of path itself.
func getXattr(path, name string) ([]byte, error) {
	for {
		n, err := unix.Lgetxattr(path, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = unix.Lgetxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		return buf[:n], err
	}
}

// readLayer extracts a layer tar that writeLayer wrote (on this node or
// another) into upper, a new, empty layer, its owners made host ids by o.
// The archive is untrusted: see above. An archive refused is an error of
// kind errdefs.ErrInvalidArgument; what was extracted by then stays, for
// the caller to remove.
func readLayer(ctx context.Context, r io.Reader, upper string, o owners) error {
	root, err := unix.Open(upper, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open writable layer: %w", err)
	}
	x := &extractor{root: root, owners: o, cachedFd: -1}
	defer x.close()
	if err := x.extract(ctx, r, x.layerEntry); err != nil {
		return err
	}
	// Last: making the entries in a directory changed its mtime.
	for _, d := range x.dirs {
		if err := x.at(d.name, func(dir int, base string) error { return setMtime(dir, base, d.mtime) }); err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
	}
	return nil
}

// readImage extracts a memory image tar that writeImage wrote into dir,
// which it makes, root's alone: the image holds the sandbox's memory, its
// secrets too. The archive is untrusted: only directories and files, of
// at most limit bytes in all (none when limit is 0).
func readImage(ctx context.Context, r io.Reader, dir string, limit int64) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	x := &extractor{root: root, cachedFd: -1}
	defer x.close()
	var total int64
	return x.extract(ctx, r, func(dir int, name string, hdr *tar.Header, data io.Reader) error {
		base := path.Base(name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if name == "." {
				return nil
			}
			return unix.Mkdirat(dir, base, 0o700)
		case tar.TypeReg:
			if total += hdr.Size; limit > 0 && total > limit {
				return errdefs.TooLarge("the memory image is over %d MiB, more than the sandbox's memory limit explains", limit>>20)
			}
			return writeFileAt(dir, base, data, hdr.Size, 0o600)
		}
		return errdefs.InvalidArgument("%s: only files and directories are in a memory image", typeName(hdr.Typeflag))
	})
}

// writeImage writes the memory image directory dir (runsc checkpoint's:
// files in directories) to w as a tar.
func writeImage(ctx context.Context, w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o700})
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o600, Size: fi.Size()}); err != nil {
				return err
			}
			return copyFileTo(tw, p, fi.Size())
		}
		return fmt.Errorf("%s in the memory image is neither a file nor a directory", rel)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// extractor places the entries of an untrusted tar beneath directory root.
type extractor struct {
	root   int // O_PATH
	owners owners

	// The directory of the last entry, which the next one is usually in.
	cachedRel string
	cachedFd  int

	dirs []dirMtime // directories made, whose mtimes are set at the end
}

type dirMtime struct {
	name  string
	mtime time.Time
}

func (x *extractor) close() {
	if x.cachedFd >= 0 {
		unix.Close(x.cachedFd)
	}
	unix.Close(x.root)
}

// extract reads the tar r and calls place for each entry, with the
// directory it is in (opened beneath root), its name (clean, relative to
// root; "." for root itself) and its data.
func (x *extractor) extract(ctx context.Context, r io.Reader, place func(dir int, name string, hdr *tar.Header, data io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errdefs.InvalidArgument("not a whole tar archive: %v", err)
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." && hdr.Typeflag != tar.TypeDir {
			return errdefs.InvalidArgument("entry %q: the top of the archive must be a directory", hdr.Name)
		}
		err = x.in(path.Dir(name), func(dir int) error { return place(dir, name, hdr, tr) })
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, refused(err))
		}
	}
}

// layerEntry places one entry of a layer.
func (x *extractor) layerEntry(dir int, name string, hdr *tar.Header, data io.Reader) error {
	base := path.Base(name)
	var err error
	switch hdr.Typeflag {
	case tar.TypeDir:
		if name != "." { // the layer's top is there already
			err = unix.Mkdirat(dir, base, 0o700)
		}
	case tar.TypeReg:
		err = writeFileAt(dir, base, data, hdr.Size, 0o600)
	case tar.TypeLink:
		return x.link(dir, base, hdr.Linkname) // sharing its file's owner, mode and xattrs
	case tar.TypeSymlink:
		err = unix.Symlinkat(hdr.Linkname, dir, base)
	case tar.TypeChar:
		if hdr.Devmajor != 0 || hdr.Devminor != 0 {
			return errdefs.InvalidArgument("a character device (%d:%d): only whiteouts (0:0) are in a writable layer", hdr.Devmajor, hdr.Devminor)
		}
		err = unix.Mknodat(dir, base, unix.S_IFCHR, 0)
	case tar.TypeFifo:
		err = unix.Mknodat(dir, base, unix.S_IFIFO|0o600, 0)
	case tar.TypeBlock:
		return errdefs.InvalidArgument("a block device (%d:%d): devices are not in a writable layer", hdr.Devmajor, hdr.Devminor)
	default:
		return errdefs.InvalidArgument("%s: not in a writable layer", typeName(hdr.Typeflag))
	}
	if err != nil {
		return err
	}
	return x.attrs(dir, name, hdr)
}

// attrs gives new entry name, in dir, its owner, mode, xattrs and mtime.
func (x *extractor) attrs(dir int, name string, hdr *tar.Header) error {
	base := path.Base(name)
	if hdr.Typeflag != tar.TypeChar { // a whiteout stays host root's, as overlayfs makes them
		uid, uok := x.owners.host(hdr.Uid)
		gid, gok := x.owners.host(hdr.Gid)
		if !uok || !gok {
			return errdefs.InvalidArgument("owned by %d:%d, not ids of a sandbox (0–%d)", hdr.Uid, hdr.Gid, idRange-1)
		}
		if err := unix.Fchownat(dir, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if hdr.Typeflag != tar.TypeSymlink {
		// After the chown, which clears setuid and setgid. The entry was
		// just made, not a symbolic link: nothing is followed.
		mode := uint32(hdr.Mode & 0o7777) // #nosec G115 -- twelve bits
		if err := unix.Fchmodat(dir, base, mode, 0); err != nil {
			return err
		}
	}
	if err := x.xattrs(dir, base, hdr.PAXRecords); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeDir {
		x.dirs = append(x.dirs, dirMtime{name: name, mtime: hdr.ModTime})
		return nil
	}
	return setMtime(dir, base, hdr.ModTime)
}

// xattrs sets the extended attributes of the PAX records that a layer
// may have (security.capability after the chown, which clears it).
func (x *extractor) xattrs(dir int, base string, records map[string]string) error {
	// The entry's own name in its directory, reached through the
	// directory's descriptor: the l-calls do not follow the last name.
	target := "/proc/self/fd/" + strconv.Itoa(dir) + "/" + base
	for key, v := range records {
		name, ok := strings.CutPrefix(key, paxXattr)
		if !ok || !movesXattr(name) {
			continue // not an attribute of a writable layer's
		}
		if leansOnLower(name) {
			return errdefs.InvalidArgument("has %s, which points into another node's template", name)
		}
		value := []byte(v)
		if name == capXattr {
			if value, ok = capRootID(value, func(id uint32) (int, bool) { return x.owners.host(int(id)) }); !ok {
				continue // a root outside the sandbox: it means nothing there
			}
		}
		if err := unix.Lsetxattr(target, name, value, 0); err != nil {
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

// link makes base in dir a hard link to the archive's file linkname.
func (x *extractor) link(dir int, base, linkname string) error {
	src, err := entryName(linkname)
	if err != nil || src == "." {
		return errdefs.InvalidArgument("a hard link to %q, which is no name in the archive", linkname)
	}
	fromDir, err := openBeneath(x.root, path.Dir(src))
	if err != nil {
		return err
	}
	if fromDir != x.root {
		defer unix.Close(fromDir)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fromDir, path.Base(src), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errdefs.InvalidArgument("a hard link to %q, which is not a file the archive made before", linkname)
	}
	return unix.Linkat(fromDir, path.Base(src), dir, base, 0)
}

// in calls f with directory rel opened beneath root (kept for the next
// entry in it).
func (x *extractor) in(rel string, f func(dir int) error) error {
	if rel == "." {
		return f(x.root)
	}
	if x.cachedFd < 0 || x.cachedRel != rel {
		fd, err := openBeneath(x.root, rel)
		if err != nil {
			return err
		}
		if x.cachedFd >= 0 {
			unix.Close(x.cachedFd)
		}
		x.cachedRel, x.cachedFd = rel, fd
	}
	return f(x.cachedFd)
}

// at calls f with the directory of name, opened beneath root, and its
// base name.
func (x *extractor) at(name string, f func(dir int, base string) error) error {
	return x.in(path.Dir(name), func(dir int) error { return f(dir, path.Base(name)) })
}

// openBeneath opens directory rel beneath root without following a
// symbolic link or leaving root; "." is root itself.
func openBeneath(root int, rel string) (int, error) {
	if rel == "." {
		return root, nil
	}
	return unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
}

// entryName returns an archive entry's name as a clean path relative to
// the archive's top ("." for the top itself), refusing names that are
// absolute or go up.
func entryName(name string) (string, error) {
	trimmed := strings.TrimSuffix(name, "/")
	switch {
	case name == "" || strings.ContainsRune(name, 0):
		return "", errdefs.InvalidArgument("an entry named %q", name)
	case strings.HasPrefix(name, "/"):
		return "", errdefs.InvalidArgument("entry %q: an absolute name", name)
	case trimmed == "" || trimmed == ".":
		return ".", nil
	}
	for _, part := range strings.Split(trimmed, "/") {
		if part == ".." {
			return "", errdefs.InvalidArgument("entry %q: a name that goes up (..)", name)
		}
	}
	return path.Clean(trimmed), nil
}

// refused says what a call that failed on an archive's entry means: the
// archive's fault, where the error says so.
func refused(err error) error {
	var kind *errdefs.Error
	switch {
	case errors.As(err, &kind):
		return err
	case errors.Is(err, unix.EEXIST):
		return errdefs.InvalidArgument("in the archive twice: %v", err)
	case errors.Is(err, unix.ENOENT):
		return errdefs.InvalidArgument("its directory is not in the archive before it: %v", err)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTDIR):
		return errdefs.InvalidArgument("its path goes through a symbolic link or a file: %v", err)
	case errors.Is(err, unix.ENAMETOOLONG):
		return errdefs.InvalidArgument("a name too long: %v", err)
	}
	return err
}

// writeFileAt makes file base in dir, of mode, with size bytes of r,
// leaving blocks of zeros holes (a sparse file stays sparse, a disk
// image does not fill the disk).
func writeFileAt(dir int, base string, r io.Reader, size int64, mode uint32) error {
	fd, err := unix.Openat(dir, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base) // #nosec G115 -- a descriptor
	defer f.Close()
	const block = 4 << 10
	buf := make([]byte, 256<<10)
	zeros := make([]byte, block)
	for off := int64(0); off < size; {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-off)])
		if err != nil {
			return errdefs.InvalidArgument("the archive ends within a file: %v", err)
		}
		for i := 0; i < n; i += block {
			b := buf[i:min(i+block, n)]
			if bytes.Equal(b, zeros[:len(b)]) {
				continue
			}
			if _, err := f.WriteAt(b, off+int64(i)); err != nil {
				return err
			}
		}
		off += int64(n)
	}
	if err := f.Truncate(size); err != nil { // holes at the end
		return err
	}
	return f.Close()
}

// typeName names a tar entry type, for messages.
func typeName(flag byte) string {
	switch flag {
	case tar.TypeReg:
		return "a file"
	case tar.TypeDir:
		return "a directory"
	case tar.TypeSymlink:
		return "a symbolic link"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a fifo"
	}
	return fmt.Sprintf("an entry of type %q", flag)
}

// setMtime sets the access and modification times of base in dir, not
// following a symbolic link.
func setMtime(dir int, base string, mtime time.Time) error {
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(dir, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
