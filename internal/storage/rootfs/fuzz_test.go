package rootfs

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParseHutchfile: any text is a Hutchfile or an error naming a line,
// never a panic; one that parses starts FROM a template and has only the
// instructions there are, each with the arguments it needs.
func FuzzParseHutchfile(f *testing.F) {
	f.Add("FROM base\nRUN apt-get install -y jq\nCOPY a b /dst/\nENV A=1 B=\"two words\"\nWORKDIR /w\nUSER user\n")
	f.Add("FROM python\nRUN [\"pip\", \"install\", \"x\"]\nRUN echo a \\\n  b\n# comment\n")
	f.Add("FROM base\nENV K v w\nCOPY --chown=1 a b\n")
	f.Add("RUN x\nFROM base")
	f.Add("FROM host\r\nRUN [\r\n")
	f.Fuzz(func(t *testing.T, text string) {
		hf, err := ParseHutchfile(text)
		if err != nil {
			if !strings.Contains(err.Error(), "Hutchfile") {
				t.Fatalf("error %q names no Hutchfile line", err)
			}
			return
		}
		if hf.From == "" {
			t.Fatalf("parsed without FROM: %+v", hf)
		}
		for _, in := range hf.Steps {
			if !slices.Contains([]string{"RUN", "COPY", "ENV", "WORKDIR", "USER"}, in.Op) || len(in.Args) == 0 || in.Line < 1 {
				t.Fatalf("step %+v of %q", in, text)
			}
			if in.Op == "COPY" && len(in.Args) < 2 {
				t.Fatalf("COPY without a source and a destination: %+v", in)
			}
		}
	})
}

// tarOf is a tar of headers, each regular file with its body.
func tarOf(f *testing.F, entries ...tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		body := []byte(h.Name)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			f.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(body); err != nil {
				f.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// FuzzUntar: an image layer (the tar of a template import) writes only
// inside its root, whatever its names, links and order: nothing appears
// beside the root, and the file planted there is untouched.
func FuzzUntar(f *testing.F) {
	f.Add(tarOf(f,
		tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "etc/os-release", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "/bin/dash"},
	))
	f.Add(tarOf(f,
		tar.Header{Name: "../outside/planted", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644},
	))
	f.Add(tarOf(f,
		tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../outside"},
		tar.Header{Name: "up/planted", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "../outside/planted"},
		tar.Header{Name: "up/.wh.planted", Typeflag: tar.TypeReg},
	))
	f.Add(tarOf(f,
		tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o4755},
		tar.Header{Name: "a/b", Typeflag: tar.TypeReg},
		tar.Header{Name: ".wh..wh..opq", Typeflag: tar.TypeReg},
		tar.Header{Name: "dev/null", Typeflag: tar.TypeChar},
	))
	f.Fuzz(func(t *testing.T, layer []byte) {
		parent := t.TempDir()
		root, outside := filepath.Join(parent, "root"), filepath.Join(parent, "outside")
		for _, d := range []string{root, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		planted := filepath.Join(outside, "planted")
		if err := os.WriteFile(planted, []byte("kept"), 0o644); err != nil {
			t.Fatal(err)
		}
		_ = untar(bytes.NewReader(layer), root, nil) // a bad layer is an error; where it writes is the check
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 {
			t.Fatalf("the layer wrote beside its root: %v", entries)
		}
		if out, err := os.ReadDir(outside); err != nil || len(out) != 1 {
			t.Fatalf("the layer wrote outside its root: %v, %v", out, err)
		}
		if b, err := os.ReadFile(planted); err != nil || string(b) != "kept" {
			t.Fatalf("the file outside the root is %q, %v", b, err)
		}
	})
}
