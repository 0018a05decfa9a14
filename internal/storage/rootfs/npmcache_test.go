package rootfs

import (
	"crypto/sha512"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// A build's npm downloads join the cache only when they are what their
// names say, and the next build's npm finds them; the build's own copy of
// npm's cache goes.
func TestNpmCacheKeepsOnlyWhatItChecked(t *testing.T) {
	root, cache := t.TempDir(), t.TempDir()
	content := filepath.Join(root, npmCacheDir, "_cacache", "content-v2", "sha512")
	place := func(name string, data []byte) {
		t.Helper()
		path := filepath.Join(content, name[:2], name[2:4], name[4:])
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha512.Sum512([]byte("a tarball"))
	good := hex.EncodeToString(sum[:])
	other := sha512.Sum512([]byte("another"))
	planted := hex.EncodeToString(other[:])
	place(good, []byte("a tarball"))
	place(planted, []byte("not what its name says"))
	if err := os.MkdirAll(filepath.Join(root, npmCacheDir, "_cacache", "index-v5"), 0o755); err != nil {
		t.Fatal(err)
	}

	if err := keepNpmCache(root, cache); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(cache, "npm", "content-v2", "sha512")
	if b, err := os.ReadFile(filepath.Join(kept, good[:2], good[2:4], good[4:])); err != nil || string(b) != "a tarball" {
		t.Errorf("the checked tarball was not kept: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(kept, planted[:2], planted[2:4], planted[4:])); !os.IsNotExist(err) {
		t.Errorf("a file that is not what its name says was kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, npmCacheDir)); !os.IsNotExist(err) {
		t.Errorf("npm's cache stayed in the root: %v", err)
	}

	next := t.TempDir()
	if err := seedNpmCache(next, cache); err != nil {
		t.Fatal(err)
	}
	seeded := filepath.Join(next, npmCacheDir, "_cacache", "content-v2", "sha512", good[:2], good[2:4], good[4:])
	if b, err := os.ReadFile(seeded); err != nil || string(b) != "a tarball" {
		t.Errorf("the next build's npm cache: %q, %v", b, err)
	}
}
