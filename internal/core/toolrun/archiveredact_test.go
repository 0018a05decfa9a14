package toolrun

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/agent/tools/archivetest"
	"github.com/hutchdev/hutch/internal/base/redact"
)

const archiveSecret = "sk-archive-0123456789"

// A directory re-packed with redaction: a secret in a file's content or
// name comes out as its mark, in both formats and in a file too big to
// hold in memory; every other file, symlink and mode is as the agent
// packed it; a symlink whose target holds the secret is left out.
func TestRedactArchive(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "out")
	big := make([]byte, spoolInMemory+1000)
	rng := rand.NewChaCha8([32]byte{})
	_, _ = rng.Read(big)
	copy(big[spoolInMemory/2:], archiveSecret)
	files := []struct {
		name, content string
		mode          fs.FileMode
	}{
		{"plain.txt", "nothing to hide\n", 0o640},
		{"run.sh", "#!/bin/sh\necho hi\n", 0o755},
		{"sub/key.env", "KEY=" + archiveSecret + "\nOTHER=1\n", 0o600},
		{"sub/" + archiveSecret + ".txt", "named after it\n", 0o644},
		{"big.bin", string(big), 0o644},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"inner": "sub/key.env", "hidden": "sub/" + archiveSecret + ".txt"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	var plain bytes.Buffer
	if err := tools.WriteArchive(&plain, dir, tools.FormatTar); err != nil {
		t.Fatal(err)
	}
	set := redact.NewSet([]redact.Secret{{Name: "TOKEN", Value: archiveSecret}})
	mark := "[redacted:TOKEN]"

	for _, format := range []string{tools.FormatTarGz, tools.FormatZip} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := redactArchive(&out, bytes.NewReader(plain.Bytes()), format, set); err != nil {
				t.Fatal(err)
			}
			got := readEntries(t, format, out.Bytes())
			want := map[string]archivetest.Entry{
				"out/":                     {Mode: fs.ModeDir | 0o755, Body: ""},
				"out/sub/":                 {Mode: fs.ModeDir | 0o755, Body: ""},
				"out/plain.txt":            {Mode: 0o640, Body: "nothing to hide\n"},
				"out/run.sh":               {Mode: 0o755, Body: "#!/bin/sh\necho hi\n"},
				"out/sub/key.env":          {Mode: 0o600, Body: "KEY=" + mark + "\nOTHER=1\n"},
				"out/sub/" + mark + ".txt": {Mode: 0o644, Body: "named after it\n"},
				"out/big.bin":              {Mode: 0o644, Body: string(set.Bytes(big))},
				"out/inner":                {Mode: fs.ModeSymlink | 0o777, Body: "sub/key.env"},
			}
			for name, w := range want {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s is missing", name)
				case g.Mode != w.Mode:
					t.Errorf("%s: mode %v, want %v", name, g.Mode, w.Mode)
				case g.Body != w.Body:
					t.Errorf("%s: %d bytes %.40q, want %d bytes %.40q", name, len(g.Body), g.Body, len(w.Body), w.Body)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("%s is there, want it left out", name)
				}
			}
			if bytes.Contains(out.Bytes(), []byte(archiveSecret)) {
				t.Error("the secret is in the compressed archive")
			}
		})
	}
}

// A re-packing cut short, by its reader or by the agent's archive,
// fails and leaves no temp file behind.
func TestRedactArchiveFailureLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Incompressible, so that the output grows as the input is read.
	big := make([]byte, 2*spoolInMemory)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(big)
	copy(big, archiveSecret)
	for _, name := range []string{"a.bin", "b.bin"} {
		if err := os.WriteFile(filepath.Join(dir, name), big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var plain bytes.Buffer
	if err := tools.WriteArchive(&plain, dir, tools.FormatTar); err != nil {
		t.Fatal(err)
	}
	set := redact.NewSet([]redact.Secret{{Name: "TOKEN", Value: archiveSecret}})
	tests := []struct {
		name string
		dst  io.Writer
		src  []byte
	}{
		{"the reader goes", &failingWriter{left: 64 << 10}, plain.Bytes()},
		{"the agent's archive is cut", io.Discard, plain.Bytes()[:plain.Len()*3/4]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := redactArchive(tc.dst, bytes.NewReader(tc.src), tools.FormatTarGz, set); err == nil {
				t.Error("no error")
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("%d files left in the temp dir", len(left))
			}
		})
	}
}

// failingWriter takes left bytes, then fails.
type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, errors.New("gone")
	}
	w.left -= len(p)
	return len(p), nil
}

// readEntries reads a tar.gz or zip archive's entries by name.
func readEntries(t *testing.T, format string, data []byte) map[string]archivetest.Entry {
	t.Helper()
	out, err := archivetest.Read(format, data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
