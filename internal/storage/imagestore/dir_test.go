package imagestore_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/imagestore"
	"github.com/hutchdev/hutch/internal/storage/imagestore/imagestoretest"
)

func openDir(t *testing.T, dir string) *imagestore.Dir {
	t.Helper()
	d, err := imagestore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

// The Store's contract, on a directory.
func TestDir(t *testing.T) {
	t.Parallel()
	var dirs sync.Map // of each store's directory
	imagestoretest.Run(t, imagestoretest.Harness{
		Open: func(t *testing.T) imagestore.Store {
			dir := t.TempDir()
			d := openDir(t, dir)
			dirs.Store(d, dir)
			return d
		},
		// What a Put writes before it renames: dot files.
		Leftovers: func(t *testing.T, s imagestore.Store) []string {
			dir, _ := dirs.Load(s)
			return dotFiles(t, dir.(string))
		},
	})
}

func dotFiles(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != dir {
			left = append(left, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// A symbolic link inside the directory, to outside it, takes no Put, Get,
// Stat or List there: everything goes through an os.Root.
func TestDirSymlinkOut(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for link, target := range map[string]string{"out": outside, "file": filepath.Join(outside, "secret"), "up": ".."} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	d := openDir(t, dir)
	for _, name := range []string{"out/secret", "file", "out/new"} {
		if r, err := d.Get(t.Context(), name); err == nil {
			r.Close()
			t.Errorf("Get(%s) read through a link out of the store", name)
		}
		if info, err := d.Stat(t.Context(), name); err == nil {
			t.Errorf("Stat(%s) = %+v through a link out of the store", name, info)
		}
	}
	for _, name := range []string{"out/new", "out/secret", "up/x"} {
		if err := d.Put(t.Context(), name, bytes.NewReader([]byte("x"))); err == nil {
			t.Errorf("Put(%s) wrote through a link out of the store", name)
		}
	}
	if err := d.Delete(t.Context(), "out/secret"); err == nil {
		if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
			t.Errorf("Delete(out/secret) removed a file out of the store: %v", err)
		}
	}
	infos, err := d.List(t.Context(), "")
	if err != nil || len(infos) != 0 {
		t.Errorf("List = %+v, %v; want nothing (links are not blobs)", infos, err)
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 {
		t.Errorf("outside the store: %v, %v; want only its file", entries, err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "host file" {
		t.Errorf("the file outside the store is now %q, %v", b, err)
	}
}

// Blobs hold what sandboxes' users wrote: only the node reads them.
func TestDirPermissions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := openDir(t, dir)
	if err := d.Put(t.Context(), "sandboxes/a/1/upper", bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"sandboxes": 0o700, "sandboxes/a/1": 0o700, "sandboxes/a/1/upper": 0o600} {
		info, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", p, got, want)
		}
	}
}

// Deleting a sandbox's last blob leaves none of its directories behind;
// the store's own directory stays.
func TestDirDeletePrunes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := openDir(t, dir)
	for _, n := range []string{"sandboxes/a/1/upper", "sandboxes/a/1/memory", "sandboxes/b/1/upper"} {
		if err := d.Put(t.Context(), n, bytes.NewReader([]byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"sandboxes/a/1/upper", "sandboxes/a/1/memory"} {
		if err := d.Delete(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes/a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("sandboxes/a is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes/b/1/upper")); err != nil {
		t.Errorf("the other sandbox's blob: %v", err)
	}
	if err := d.Delete(t.Context(), "sandboxes/b/1/upper"); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the store's directory holds %v, %v; want nothing", entries, err)
	}
}

func TestOpenDirErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nfs-not-mounted")
	tests := []struct {
		name, dir, want string
	}{
		{"missing", missing, "does not exist"},
		{"a file", file, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := imagestore.OpenDir(tt.dir)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenDir(%s) = %v, want ErrInvalidArgument saying %q", tt.dir, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Error("OpenDir made the missing directory")
	}
}
