package tools

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// No entry of a directory's archive can land outside where it is
// unpacked: names are clean and relative under one top directory, and
// only symlinks that stay inside the tree are kept.
func TestWriteArchive(t *testing.T) {
	f := newFiles(t, map[string]string{"out/report.csv": "a,b\n", "out/sub/deep.txt": "deep\n", "outside.txt": "secret"})
	dir := filepath.Join(f.Dir, "out")
	for name, target := range map[string]string{
		"inner":       "sub/deep.txt",      // kept
		"sub/up":      "../report.csv",     // kept: still inside
		"etc":         "/etc",              // dropped: absolute
		"escape":      "../outside.txt",    // dropped: leaves the tree
		"sub/escape2": "../../outside.txt", // dropped
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Neither etc nor the escapes are there.
	want := "out/ out/inner->sub/deep.txt out/report.csv=a,b\n out/sub/ out/sub/deep.txt=deep\n out/sub/up->../report.csv"
	for _, format := range []string{FormatTarGz, FormatZip, FormatTar} {
		var buf bytes.Buffer
		if err := WriteArchive(&buf, dir, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		entries := readArchive(t, format, buf.Bytes())
		for _, e := range strings.Fields(entries) {
			name, _, _ := strings.Cut(strings.Split(e, "=")[0], "->")
			if path.IsAbs(name) || !strings.HasPrefix(name, "out/") && name != "out/" || strings.Contains("/"+name+"/", "/../") {
				t.Errorf("%s: entry %q could land outside", format, name)
			}
		}
		if entries != want {
			t.Errorf("%s entries:\n got %s\nwant %s", format, entries, want)
		}
	}
	if err := WriteArchive(io.Discard, dir, "rar"); kindOf(err) != KindInvalidArgument {
		t.Errorf("an unknown format: %v", err)
	}
	if err := WriteArchive(io.Discard, filepath.Join(dir, "report.csv"), FormatZip); kindOf(err) != KindInvalidArgument {
		t.Errorf("a file: %v", err)
	}
}

// readArchive lists an archive's entries, sorted as written: dirs end in
// /, files show =content, symlinks ->target.
func readArchive(t *testing.T, format string, data []byte) string {
	t.Helper()
	var out []string
	if format == FormatZip {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, zf := range zr.File {
			rc, err := zf.Open()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(rc)
			_ = rc.Close()
			switch {
			case zf.Mode()&os.ModeSymlink != 0:
				out = append(out, zf.Name+"->"+string(body))
			case strings.HasSuffix(zf.Name, "/"):
				out = append(out, zf.Name)
			default:
				out = append(out, zf.Name+"="+string(body))
			}
		}
		return strings.Join(out, " ")
	}
	var r io.Reader = bytes.NewReader(data)
	if format != FormatTar {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			out = append(out, hdr.Name+"->"+hdr.Linkname)
		case tar.TypeDir:
			out = append(out, hdr.Name)
		default:
			out = append(out, hdr.Name+"="+string(body))
		}
	}
	return strings.Join(out, " ")
}
