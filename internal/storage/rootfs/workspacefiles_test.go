package rootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// tarOf makes a tar of the given headers; a regular file's body is its
// Linkname field's text (so one literal describes both).
func workspaceTar(t *testing.T, gz bool, hdrs ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestWorkspaceFilesFromTar(t *testing.T) {
	t.Parallel()
	ws := Workspace
	user := func(f backend.File) backend.File { f.UID, f.GID = UserUID, UserGID; return f }
	dir := user(backend.File{Dir: true, Mode: 0o755})
	for _, gz := range []bool{false, true} {
		tb := workspaceTar(t, gz,
			tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
			tar.Header{Name: "./bin/", Typeflag: tar.TypeDir, Mode: 0o750},
			tar.Header{Name: "./bin/run.sh", Typeflag: tar.TypeReg, Mode: 0o4755, Linkname: "#!/bin/sh\n", Uid: 0},
			tar.Header{Name: "src/lib/a.py", Typeflag: tar.TypeReg, Mode: 0o600, Linkname: "a = 1\n"},
			tar.Header{Name: "src/b.py", Typeflag: tar.TypeLink, Linkname: "./src/lib/a.py"},
			tar.Header{Name: "etc-link", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
			tar.Header{Name: "notes.txt", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "from the tar"},
		)
		got, err := WorkspaceFiles(map[string]string{"notes.txt": "from the map"}, tb)
		if err != nil {
			t.Fatalf("gzip %v: %v", gz, err)
		}
		want := map[string]backend.File{
			ws + "/bin":          user(backend.File{Dir: true, Mode: 0o750}),
			ws + "/bin/run.sh":   user(backend.File{Data: []byte("#!/bin/sh\n"), Mode: 0o755}),
			ws + "/src":          dir,
			ws + "/src/lib":      dir,
			ws + "/src/lib/a.py": user(backend.File{Data: []byte("a = 1\n"), Mode: 0o600}),
			ws + "/src/b.py":     user(backend.File{Data: []byte("a = 1\n"), Mode: 0o600}),
			ws + "/etc-link":     user(backend.File{Link: "/etc", Mode: 0o777}),
			ws + "/notes.txt":    user(backend.File{Data: []byte("from the map"), Mode: 0o644}),
		}
		if len(got) != len(want) {
			t.Errorf("gzip %v: %d entries, want %d: %v", gz, len(got), len(want), got)
		}
		for p, w := range want {
			g := got[p]
			if g.Dir != w.Dir || g.Link != w.Link || g.Mode != w.Mode || string(g.Data) != string(w.Data) || g.UID != w.UID || g.GID != w.GID {
				t.Errorf("gzip %v: %s = %+v, want %+v", gz, p, g, w)
			}
		}
	}
}

func TestWorkspaceFilesRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		tar   []tar.Header
		want  string
	}{
		{name: "map escapes", files: map[string]string{"../escape": "x"}, want: "is not a path in"},
		{name: "map absolute elsewhere", files: map[string]string{"/etc/passwd": "x"}, want: "is not a path in"},
		{name: "file under a file", files: map[string]string{"a": "f", "a/b": "g"}, want: "both a file and a directory"},
		{name: "tar escapes", tar: []tar.Header{{Name: "../../etc/cron.d/x", Typeflag: tar.TypeReg, Linkname: "x"}}, want: "is not a path in"},
		{name: "tar absolute elsewhere", tar: []tar.Header{{Name: "/root/.ssh/authorized_keys", Typeflag: tar.TypeReg}}, want: "is not a path in"},
		{name: "file through a symlink", tar: []tar.Header{
			{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
			{Name: "out/passwd", Typeflag: tar.TypeReg, Linkname: "root::0:0::/:/bin/sh"},
		}, want: "is a symlink"},
		{name: "map file through a tar symlink", tar: []tar.Header{{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "/"}},
			files: map[string]string{"out/x": "y"}, want: "is a symlink"},
		{name: "symlink over a directory", tar: []tar.Header{
			{Name: "d/f", Typeflag: tar.TypeReg},
			{Name: "d", Typeflag: tar.TypeSymlink, Linkname: "/"},
		}, want: "both a file and a directory"},
		{name: "device", tar: []tar.Header{{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, want: "only regular files"},
		{name: "hard link out", tar: []tar.Header{{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}}, want: "not a regular file before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tb []byte
			if tc.tar != nil {
				tb = workspaceTar(t, false, tc.tar...)
			}
			_, err := WorkspaceFiles(tc.files, tb)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if _, err := WorkspaceFiles(nil, []byte("not a tar at all, just text that is long enough to be read as a header block")); err == nil || !strings.Contains(err.Error(), "files_tar") {
		t.Errorf("garbage: %v, want a files_tar error", err)
	}
	big := workspaceTar(t, true, tar.Header{Name: "big", Typeflag: tar.TypeReg, Linkname: strings.Repeat("x", maxCreateFileBytes+1)})
	if _, err := WorkspaceFiles(nil, big); err == nil || !strings.Contains(err.Error(), "MiB together") {
		t.Errorf("a tar over the bound: %v", err)
	}
}
