package rootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Bounds of the files a create places in the workspace, map and tar
// together.
const (
	maxCreateFiles     = 10000
	maxCreateFileBytes = 32 << 20
)

// WorkspaceFiles turns the files of a create into files of the sandbox's
// writable layer, owned by the sandbox user, with the directories between
// made too. tarball (a tar, gzipped or not) is unpacked first, then files
// (paths to their text) are laid over it. Paths are in the workspace or
// absolute under it; one that leaves it is refused.
func WorkspaceFiles(files map[string]string, tarball []byte) (map[string]backend.File, error) {
	ws := workspaceTree{}
	if len(tarball) > 0 {
		if err := ws.addTar(tarball); err != nil {
			return nil, fmt.Errorf("files_tar: %w", err)
		}
	}
	for p, text := range files {
		if err := ws.add(p, backend.File{Data: []byte(text), Mode: 0o644}); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
	}
	return ws, ws.check()
}

// workspaceTree is the files of a create, by absolute path.
type workspaceTree map[string]backend.File

// add places f at p (in the workspace), as the sandbox user's, and makes
// the directories above it.
func (ws workspaceTree) add(p string, f backend.File) error {
	abs := WorkspacePath(p)
	if p == "" || !strings.HasPrefix(abs, Workspace+"/") {
		return fmt.Errorf("%q is not a path in %s", p, Workspace)
	}
	f.UID, f.GID = UserUID, UserGID
	f.Mode &= 0o777 // no setuid, setgid or sticky bits from outside
	if old, ok := ws[abs]; ok && old.Dir && !f.Dir {
		return fmt.Errorf("%q is both a file and a directory", abs)
	}
	ws[abs] = f
	for dir := path.Dir(abs); dir != Workspace; dir = path.Dir(dir) {
		if old, ok := ws[dir]; ok {
			switch {
			case old.Link != "":
				return fmt.Errorf("%q is a symlink: nothing can be placed under it", dir)
			case !old.Dir:
				return fmt.Errorf("%q is both a file and a directory", dir)
			}
			continue
		}
		ws[dir] = backend.File{Dir: true, Mode: 0o755, UID: UserUID, GID: UserGID}
	}
	if len(ws) > maxCreateFiles {
		return fmt.Errorf("more than %d files and directories", maxCreateFiles)
	}
	return nil
}

// check bounds the size of the whole tree.
func (ws workspaceTree) check() error {
	total := 0
	for _, f := range ws {
		if total += len(f.Data); total > maxCreateFileBytes {
			return fmt.Errorf("files: more than %d MiB together", maxCreateFileBytes>>20)
		}
	}
	return nil
}

// addTar adds the regular files, directories and symlinks of a tar, whose
// names are relative to the workspace. A hard link becomes a copy of the
// file it names. Owners in the tar are ignored.
func (ws workspaceTree) addTar(tarball []byte) error {
	var r io.Reader = bytes.NewReader(tarball)
	if bytes.HasPrefix(tarball, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		r = zr
	}
	tr := tar.NewReader(r)
	read := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a readable tar: %w", err)
		}
		name := strings.TrimPrefix(path.Clean(hdr.Name), "./")
		if name == "." || name == "/" || hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		mode := uint32(hdr.FileInfo().Mode().Perm())
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = ws.add(name, backend.File{Dir: true, Mode: mode | 0o700})
		case tar.TypeSymlink:
			err = ws.add(name, backend.File{Link: hdr.Linkname, Mode: 0o777})
		case tar.TypeLink:
			target, ok := ws[WorkspacePath(strings.TrimPrefix(path.Clean(hdr.Linkname), "./"))]
			if !ok || target.Dir || target.Link != "" {
				return fmt.Errorf("%s: a hard link to %q, which is not a regular file before it", hdr.Name, hdr.Linkname)
			}
			err = ws.add(name, target)
		case tar.TypeReg:
			if read += int(hdr.Size); read > maxCreateFileBytes {
				return fmt.Errorf("more than %d MiB together", maxCreateFileBytes>>20)
			}
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = ws.add(name, backend.File{Data: data, Mode: mode})
			}
		default:
			return fmt.Errorf("%s: only regular files, directories, symlinks and hard links can be placed, not type %q", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}
