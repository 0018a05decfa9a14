package rootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"path"
	"strings"
	"testing"
)

// seedTar is a tar of headers for the fuzzer to start from, gzipped when
// zipped.
func seedTar(f *testing.F, zipped bool, entries ...tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(&h); err != nil {
			f.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(h.Name))
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	if !zipped {
		return b.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b.Bytes())
	_ = zw.Close()
	return z.Bytes()
}

// FuzzWorkspaceFiles: the files of a create (a tar, gzipped or not, and
// files by path) are placed in the workspace and nowhere else: no path
// leaves it, nothing is placed under a symlink, no mode carries setuid,
// setgid or sticky bits, everything is the sandbox user's, and the whole
// stays within its bound.
func FuzzWorkspaceFiles(f *testing.F) {
	f.Add(seedTar(f, false,
		tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "src/main.py", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "copy", Typeflag: tar.TypeLink, Linkname: "src/main.py"},
	), "notes.txt", "hello")
	f.Add(seedTar(f, true,
		tar.Header{Name: "../../etc/passwd", Typeflag: tar.TypeReg, Mode: 0o4755},
		tar.Header{Name: "/home/user/workspace/abs", Typeflag: tar.TypeReg, Mode: 0o644},
	), "/etc/shadow", "x")
	f.Add(seedTar(f, false,
		tar.Header{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		tar.Header{Name: "out/passwd", Typeflag: tar.TypeReg, Mode: 0o644},
	), "out/cron", "x")
	f.Add([]byte{0x1f, 0x8b, 0, 1}, "", "")
	f.Fuzz(func(t *testing.T, tarball []byte, name, text string) {
		files := map[string]string{}
		if name != "" {
			files[name] = text
		}
		placed, err := WorkspaceFiles(files, tarball)
		if err != nil {
			return
		}
		total := 0
		for p, file := range placed {
			if path.Clean(p) != p || !strings.HasPrefix(p, Workspace+"/") {
				t.Fatalf("%q placed outside the workspace", p)
			}
			if file.Mode&^0o777 != 0 || file.UID != UserUID || file.GID != UserGID {
				t.Fatalf("%q placed with mode %o, owner %d:%d", p, file.Mode, file.UID, file.GID)
			}
			for dir := path.Dir(p); dir != Workspace; dir = path.Dir(dir) {
				if placed[dir].Link != "" {
					t.Fatalf("%q placed under the symlink %q -> %q", p, dir, placed[dir].Link)
				}
			}
			total += len(file.Data)
		}
		if total > maxCreateFileBytes || len(placed) > maxCreateFiles {
			t.Fatalf("%d files of %d bytes placed, over the bounds", len(placed), total)
		}
	})
}
