package rootfs

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hutchdev/hutch/internal/base/ctxio"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Templates travel between the nodes of a scale-out (internal/cluster) as
// archives: a tar of one version's rootfs/ and, for a snapshot with
// memory, memory/, with owners, modes, times, symbolic and hard links
// kept. The receiver keeps the sender's version and info, so that a
// sandbox's template version means the same files on every node (a
// suspended sandbox's changes lie on top of them), and checks the stream
// against the SHA-256 the sender computed while sending it.

// WriteArchive writes version of template name as an archive to w, and
// returns its SHA-256 (hex).
func (s *Store) WriteArchive(ctx context.Context, w io.Writer, name, version string) (string, error) {
	if name == HostName {
		return "", errdefs.InvalidArgument("the host template is every node's own: it is not copied")
	}
	info, err := s.versionInfo(name, version)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.dir, info.Name, info.Version)
	sum := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(w, sum))
	links := map[uint64]string{} // inode → the first name of a file with several
	for _, part := range []string{"rootfs", "memory"} {
		if _, err := os.Lstat(filepath.Join(dir, part)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := filepath.WalkDir(filepath.Join(dir, part), func(p string, d fs.DirEntry, err error) error {
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
			return writeEntry(tw, p, rel, links)
		})
		if err != nil {
			return "", fmt.Errorf("archive template %s@%s: %w", name, version, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// writeEntry writes the file at p as rel. Sockets, fifos and devices are
// not in templates (sandboxes get their devices from the runtime).
func writeEntry(tw *tar.Writer, p, rel string, links map[uint64]string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner", p)
	}
	var link string
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	case fi.IsDir():
	case fi.Mode().IsRegular():
	default:
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = filepath.ToSlash(rel)
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = int(st.Uid), int(st.Gid), "", ""
	hdr.Format = tar.FormatPAX // long names, exact times
	if fi.Mode().IsRegular() && st.Nlink > 1 {
		if first, ok := links[st.Ino]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		} else {
			links[st.Ino] = hdr.Name
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	// #nosec G304 -- a file of the store
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// Receive makes the version info names of template info.Name from an
// archive read from r (see WriteArchive) and makes it current, unless the
// store has that version already. sum is the SHA-256 the sender tells,
// read once r has ended (an HTTP trailer's); a stream that does not match
// it leaves nothing.
func (s *Store) Receive(ctx context.Context, info Info, r io.Reader, sum func() string) (_ Info, err error) {
	if !validVersion(info.Version) {
		return Info{}, errdefs.InvalidArgument("template %s: version %q is not a template version", info.Name, info.Version)
	}
	if have, err := s.versionInfo(info.Name, info.Version); err == nil {
		return have, nil
	}
	b, err := s.Begin(info.Name)
	if err != nil {
		return Info{}, err
	}
	defer func() { err = b.fail(ctx, err) }()
	h := sha256.New()
	// Unbounded: a node's archive of a template that node already holds.
	if err := untar(io.TeeReader(ctxio.Reader(ctx, r), h), b.dir, nil); err != nil {
		return Info{}, fmt.Errorf("receive template %s@%s: %w", info.Name, info.Version, err)
	}
	// What follows the tar's end (its padding) counts too.
	if _, err := io.Copy(h, ctxio.Reader(ctx, r)); err != nil {
		return Info{}, fmt.Errorf("receive template %s@%s: %w", info.Name, info.Version, err)
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), sum(); got != want {
		return Info{}, fmt.Errorf("receive template %s@%s: the archive's SHA-256 is %s, its sender's %q", info.Name, info.Version, got, want)
	}
	return b.commitAs(info)
}
