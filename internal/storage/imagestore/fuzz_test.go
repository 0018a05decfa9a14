package imagestore

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// FuzzDirNames: whatever the name, a directory store writes, reads, lists
// and deletes inside its directory only, and refuses (ErrInvalidArgument)
// every name that ValidName refuses. Its corpus is in
// testdata/fuzz/FuzzDirNames; go test -fuzz FuzzDirNames looks for more.
func FuzzDirNames(f *testing.F) {
	parent := f.TempDir()
	root := filepath.Join(parent, "store")
	if err := os.Mkdir(root, 0o700); err != nil {
		f.Fatal(err)
	}
	// Beside the store: what no name may reach.
	outside := filepath.Join(parent, "outside")
	if err := os.WriteFile(outside, []byte("host"), 0o600); err != nil {
		f.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = d.Close() })
	d.noSync = true
	f.Fuzz(func(t *testing.T, name string) {
		ctx := t.Context()
		valid := ValidName(name) == nil
		err := d.Put(ctx, name, strings.NewReader("x"))
		switch {
		case !valid && !errors.Is(err, errdefs.ErrInvalidArgument):
			t.Fatalf("Put(%q) of a name ValidName refuses = %v, want ErrInvalidArgument", name, err)
		case valid && err != nil:
			t.Fatalf("Put(%q) = %v", name, err)
		}
		if valid {
			if !filepath.IsLocal(name) {
				t.Fatalf("ValidName takes %q, which is not local", name)
			}
			if b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name))); err != nil || string(b) != "x" {
				t.Fatalf("Put(%q) did not write root/%s: %q, %v", name, name, b, err)
			}
			r, err := d.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil || string(b) != "x" {
				t.Fatalf("Get(%q) = %q, %v", name, b, err)
			}
		}
		// The name as a prefix: a valid name is a valid prefix, and a List
		// lists only names under the store that begin with it.
		infos, err := d.List(ctx, name)
		switch {
		case validPrefix(name) != nil && !errors.Is(err, errdefs.ErrInvalidArgument):
			t.Fatalf("List(%q) of a prefix validPrefix refuses = %v, want ErrInvalidArgument", name, err)
		case valid && validPrefix(name) != nil:
			t.Fatalf("validPrefix refuses %q, which ValidName takes", name)
		case validPrefix(name) == nil && err != nil:
			t.Fatalf("List(%q) = %v", name, err)
		}
		for _, i := range infos {
			if !strings.HasPrefix(i.Name, name) || ValidName(i.Name) != nil {
				t.Fatalf("List(%q) lists %q", name, i.Name)
			}
		}
		if valid && !slices.ContainsFunc(infos, func(i Info) bool { return i.Name == name }) {
			t.Fatalf("List(%q) = %v, without the blob itself", name, infos)
		}
		if err := d.Delete(ctx, name); valid != (err == nil) {
			t.Fatalf("Delete(%q) = %v", name, err)
		}
		// Every iteration leaves the store as it found it (Delete prunes
		// the directories it empties), and nothing beside it is touched.
		if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
			t.Fatalf("after %q the store holds %v, %v", name, entries, err)
		}
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 2 {
			t.Fatalf("after %q the store's parent holds %v, %v", name, entries, err)
		}
		if b, err := os.ReadFile(outside); err != nil || string(b) != "host" {
			t.Fatalf("after %q the file beside the store is %q, %v", name, b, err)
		}
	})
}
