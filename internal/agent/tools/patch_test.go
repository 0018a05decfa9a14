package tools

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// snapshot reads every file under f.Dir, by relative path.
func snapshot(t *testing.T, f Files) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(f.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(f.Dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func applyOK(t *testing.T, f Files, patch string) PatchResult {
	t.Helper()
	res, err := call[PatchResult](t, f, ApplyPatch, patchArgs{Patch: patch})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return res
}

func actions(r PatchResult) []string {
	var out []string
	for _, p := range r.Files {
		out = append(out, p.Action+" "+filepath.Base(p.Path))
	}
	return out
}

func TestApplyUnifiedDiff(t *testing.T) {
	f := newFiles(t, map[string]string{
		"src/app.py": "import os\n\ndef main():\n    print('hi')\n\nmain()\n",
		"old.txt":    "gone\n",
		"notes.md":   "a\nb\nc",
	})
	res := applyOK(t, f, `diff --git a/src/app.py b/src/app.py
index 111..222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -3,2 +3,3 @@ import os
 def main():
-    print('hi')
+    print('hello')
+    return 0
diff --git a/new/util.py b/new/util.py
new file mode 100644
--- /dev/null
+++ b/new/util.py
@@ -0,0 +1,2 @@
+def util():
+    pass
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
--- notes.md	2026-11-22 10:00:00
+++ notes.md	2026-11-22 10:01:00
@@ -2,2 +2,2 @@
 b
-c
\ No newline at end of file
+c
`)
	if want := []string{"updated app.py", "added util.py", "deleted old.txt", "updated notes.md"}; !slices.Equal(actions(res), want) {
		t.Errorf("actions %v, want %v", actions(res), want)
	}
	want := map[string]string{
		"src/app.py":  "import os\n\ndef main():\n    print('hello')\n    return 0\n\nmain()\n",
		"new/util.py": "def util():\n    pass\n",
		"notes.md":    "a\nb\nc\n",
	}
	if got := snapshot(t, f); !maps.Equal(got, want) {
		t.Errorf("files after the patch:\n%q\nwant\n%q", got, want)
	}
}

func TestApplyBeginPatch(t *testing.T) {
	f := newFiles(t, map[string]string{
		"calc.py":   "class Calc:\n    def add(self, a, b):\n        return a + b\n\n    def sub(self, a, b):\n        return a + b\n",
		"win.txt":   "one\r\ntwo\r\nthree\r\n",
		"legacy.py": "x = 1\n",
		"drop.txt":  "bye\n",
	})
	res := applyOK(t, f, `Here is the change:
*** Begin Patch
*** Update File: calc.py
@@     def sub(self, a, b):
-        return a + b
+        return a - b
*** Update File: win.txt
 one
-two
+TWO
*** Add File: docs/README.md
+# Calc
+
+Adds and subtracts.
*** Update File: legacy.py
*** Move to: modern.py
-x = 1
+x = 2
*** Delete File: drop.txt
*** End Patch
`)
	if want := []string{"updated calc.py", "updated win.txt", "added README.md", "moved modern.py", "deleted drop.txt"}; !slices.Equal(actions(res), want) {
		t.Errorf("actions %v, want %v", actions(res), want)
	}
	want := map[string]string{
		// The @@ line picks the second `return a + b`.
		"calc.py":        "class Calc:\n    def add(self, a, b):\n        return a + b\n\n    def sub(self, a, b):\n        return a - b\n",
		"win.txt":        "one\r\nTWO\r\nthree\r\n", // CRLF kept
		"docs/README.md": "# Calc\n\nAdds and subtracts.\n",
		"modern.py":      "x = 2\n",
	}
	if got := snapshot(t, f); !maps.Equal(got, want) {
		t.Errorf("files after the patch:\n%q\nwant\n%q", got, want)
	}
}

// A patch touching three files with one bad hunk changes nothing, and says
// which hunk and where.
func TestApplyPatchAllOrNothing(t *testing.T) {
	files := map[string]string{
		"a.txt": "alpha\nbeta\ngamma\n",
		"b.txt": "one\ntwo\nthree\n",
		"c.txt": "red\ngreen\nblue\n",
	}
	f := newFiles(t, files)
	_, err := call[PatchResult](t, f, ApplyPatch, patchArgs{Patch: `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 alpha
-beta
+BETA
 gamma
--- a/b.txt
+++ b/b.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
--- a/c.txt
+++ b/c.txt
@@ -1,3 +1,3 @@
 red
-yellow
+YELLOW
 blue
`})
	if kindOf(err) != KindInvalidArgument {
		t.Fatalf("a bad hunk: %v, want invalid_argument", err)
	}
	for _, want := range []string{"c.txt", "hunk 1 of 1", `line 2 is "green" where the hunk has "yellow"`, "no file was changed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if got := snapshot(t, f); !maps.Equal(got, files) {
		t.Errorf("files changed by a failed patch: %q", got)
	}
}

func TestApplyPatchRefused(t *testing.T) {
	f := newFiles(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	before := snapshot(t, f)
	for name, patch := range map[string]string{
		"empty":              "  \n",
		"no change":          "just some words\n",
		"add an existing":    "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n",
		"no end":             "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n",
		"bad line":           "*** Begin Patch\n*** Update File: a.txt\n?a\n*** End Patch\n",
		"twice":              "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Update File: a.txt\n-b\n+c\n*** End Patch\n",
		"move onto existing": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n-a\n+c\n*** End Patch\n",
		"anchor missing":     "*** Begin Patch\n*** Update File: a.txt\n@@ def nowhere():\n-a\n+b\n*** End Patch\n",
		"short hunk":         "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-a\n+b\n",
		"bad header":         "--- a/a.txt\n+++ b/a.txt\n@@ one two @@\n-a\n+b\n",
		"huge line number":   "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +0 @@\n+\n@@ -10000000000000000000,0 +0 @@\n+0\n",
		"huge line count":    "--- a/a.txt\n+++ b/a.txt\n@@ -1,9999999999 +1 @@\n-a\n+b\n",
	} {
		if _, err := call[PatchResult](t, f, ApplyPatch, patchArgs{Patch: patch}); kindOf(err) != KindInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	if _, err := call[PatchResult](t, f, ApplyPatch, patchArgs{Patch: "*** Begin Patch\n*** Update File: missing.txt\n-a\n+b\n*** End Patch\n"}); kindOf(err) != KindNotFound {
		t.Errorf("a missing file: %v, want not_found", err)
	}
	if got := snapshot(t, f); !maps.Equal(got, before) {
		t.Errorf("files changed by refused patches: %q", got)
	}
}

// Hunks are found where the line numbers say, or nearby when the file
// moved on, and whitespace at the ends of lines is forgiven.
func TestApplyPatchFuzz(t *testing.T) {
	f := newFiles(t, map[string]string{"a.go": "package a\n\n// added above\n\nfunc A() {   \n\treturn\n}\n"})
	applyOK(t, f, `--- a/a.go
+++ b/a.go
@@ -3,3 +3,3 @@
 func A() {
-	return
+	return // done
 }
`)
	// Context lines stay as the file has them, trailing spaces and all.
	if got := readBack(t, f, "a.go"); got != "package a\n\n// added above\n\nfunc A() {   \n\treturn // done\n}\n" {
		t.Errorf("after a shifted hunk: %q", got)
	}
	if entries, _ := filepath.Glob(filepath.Join(f.Dir, ".*hutch*")); len(entries) > 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// A hunk whose line numbers point before what an earlier hunk changed
// (hunks out of order) is placed after it, not before the file's start.
func TestApplyHunksOutOfOrder(t *testing.T) {
	changes, err := parsePatch("--- a/f\n+++ b/f\n@@ -1,5 +0,0 @@\n-a\n-b\n-c\n-d\n-e\n@@ -1,0 +1 @@\n+x\n")
	if err != nil || len(changes) != 1 {
		t.Fatalf("parsePatch = %v, %v", changes, err)
	}
	got, err := applyHunks("f", "a\nb\nc\nd\ne\n", changes[0].hunks)
	if err != nil || got != "x\n" {
		t.Fatalf("applyHunks = %q, %v; want \"x\\n\"", got, err)
	}
}
