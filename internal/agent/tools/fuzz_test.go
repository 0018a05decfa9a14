package tools

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzPatch: any text is a patch or an error, never a panic, in either
// format; applying what parses to any file is a result or an error too.
func FuzzPatch(f *testing.F) {
	f.Add("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "a\nb\n")
	f.Add("*** Begin Patch\n*** Update File: f.txt\n@@ def f():\n-    return 1\n+    return 2\n*** End Patch\n", "def f():\n    return 1\n")
	f.Add("*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Delete File: old.txt\n*** End Patch", "")
	f.Add("--- f\n+++ f\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n", "")
	f.Add("@@ -1 +1 @@\n-\r\n+\r\n", "\r\n")
	f.Fuzz(func(t *testing.T, patch, file string) {
		changes, err := parsePatch(patch)
		if err != nil {
			return
		}
		for _, c := range changes {
			_, _ = applyHunks("f.txt", file, c.hunks)
		}
	})
}

// FuzzLinkStaysInside: a symlink of an archive is kept as a link only
// when, followed from where it is, it stays inside the archived tree.
func FuzzLinkStaysInside(f *testing.F) {
	f.Add("a/b/link", "../c")
	f.Add("link", "../../etc/passwd")
	f.Add("a/link", "/etc")
	f.Add("a/link", "b/../../..")
	f.Fuzz(func(t *testing.T, rel, target string) {
		if !filepath.IsLocal(rel) {
			return // rel is a path the walk found in the tree
		}
		if !linkStaysInside(rel, target) {
			return
		}
		to := path.Join(path.Dir(rel), target)
		if path.IsAbs(target) || to == ".." || strings.HasPrefix(to, "../") || path.IsAbs(to) {
			t.Fatalf("link %q -> %q kept, but it leads to %q", rel, target, to)
		}
	})
}
