package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each file tool against the same edge cases: an empty file, CRLF lines,
// no final newline, bytes that are not UTF-8, a file over the edit bound,
// a path out of the workspace (../), and a symlink in the workspace to a
// file outside it. (That a symlink cannot leave the sandbox itself is the
// end-to-end tests' part: here the "sandbox" is the test's own machine.)
func TestEdgeCases(t *testing.T) {
	huge := strings.Repeat("0123456789abcde\n", (maxEditBytes>>4)+1) // just over maxEditBytes
	setup := func(t *testing.T) Files {
		f := newFiles(t, map[string]string{
			"ws/empty.txt":  "",
			"ws/crlf.txt":   "one\r\ntwo\r\n",
			"ws/noeol.txt":  "one\ntwo",
			"ws/latin1.txt": "caf\xe9\nna\xefve\n",
			"ws/huge.txt":   huge,
			"outside.txt":   "outside\n",
		})
		if err := os.Symlink("../outside.txt", filepath.Join(f.Dir, "ws", "link.txt")); err != nil {
			t.Fatal(err)
		}
		f.Dir = filepath.Join(f.Dir, "ws") // the workspace
		return f
	}
	type check func(t *testing.T, f Files, res any, err error)
	ok := func(want func(f Files) string) check { // success, and the file reads want after
		return func(t *testing.T, f Files, _ any, err error) {
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if want != nil {
				if got := want(f); got != "" {
					t.Error(got)
				}
			}
		}
	}
	fails := func(kind, says string) check {
		return func(t *testing.T, _ Files, _ any, err error) {
			if kindOf(err) != kind || !strings.Contains(err.Error(), says) {
				t.Errorf("error %v, want kind %s saying %q", err, kind, says)
			}
		}
	}
	content := func(p, want string) func(f Files) string {
		return func(f Files) string {
			b, err := os.ReadFile(filepath.Join(f.Dir, p))
			if err != nil || string(b) != want {
				return "file " + p + " is " + strings.ReplaceAll(string(b), "\r", `\r`) + ", want " + strings.ReplaceAll(want, "\r", `\r`)
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		want check
	}{
		// sandbox_write_file
		{"write an empty file", WriteFile, map[string]any{"path": "empty.txt", "content": ""}, ok(content("empty.txt", ""))},
		{"write CRLF as given", WriteFile, map[string]any{"path": "crlf.txt", "content": "a\r\nb\r\n"}, ok(content("crlf.txt", "a\r\nb\r\n"))},
		{"write without a final newline", WriteFile, map[string]any{"path": "noeol.txt", "content": "x"}, ok(content("noeol.txt", "x"))},
		{"write over a huge file", WriteFile, map[string]any{"path": "huge.txt", "content": "small"}, ok(content("huge.txt", "small"))},
		{"write out of the workspace", WriteFile, map[string]any{"path": "../made.txt", "content": "m"}, ok(content("../made.txt", "m"))},
		{"write through a symlink", WriteFile, map[string]any{"path": "link.txt", "content": "via link"}, ok(content("../outside.txt", "via link"))},
		// sandbox_find_replace
		{"replace in an empty file", FindReplace, map[string]any{"path": "empty.txt", "find": "a", "replace": "b"}, fails(KindInvalidArgument, "not in")},
		{"replace keeps CRLF", FindReplace, map[string]any{"path": "crlf.txt", "find": "two", "replace": "2"}, ok(content("crlf.txt", "one\r\n2\r\n"))},
		{"replace keeps no final newline", FindReplace, map[string]any{"path": "noeol.txt", "find": "two", "replace": "2"}, ok(content("noeol.txt", "one\n2"))},
		{"replace keeps other bytes", FindReplace, map[string]any{"path": "latin1.txt", "find": "caf", "replace": "CAF"}, ok(content("latin1.txt", "CAF\xe9\nna\xefve\n"))},
		{"replace text read as U+FFFD", FindReplace, map[string]any{"path": "latin1.txt", "find": "caf\uFFFD", "replace": "x"}, fails(KindInvalidArgument, ApplyPatch+" matches them")},
		{"replace in a huge file", FindReplace, map[string]any{"path": "huge.txt", "find": "0", "replace": "1"}, fails(KindInvalidArgument, "MiB are not edited")},
		{"replace out of the workspace", FindReplace, map[string]any{"path": "../outside.txt", "find": "outside", "replace": "in"}, ok(content("../outside.txt", "in\n"))},
		{"replace through a symlink", FindReplace, map[string]any{"path": "link.txt", "find": "outside", "replace": "linked"}, ok(func(f Files) string {
			if fi, err := os.Lstat(filepath.Join(f.Dir, "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				return "the symlink was replaced by a file"
			}
			return content("../outside.txt", "linked\n")(f)
		})},
		// sandbox_apply_patch
		{"patch an empty file", ApplyPatch, map[string]any{"patch": "--- a/empty.txt\n+++ b/empty.txt\n@@ -0,0 +1 @@\n+first\n"}, ok(content("empty.txt", "first\n"))},
		{"patch keeps CRLF", ApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** Update File: crlf.txt\n one\n-two\n+2\n*** End Patch\n"}, ok(content("crlf.txt", "one\r\n2\r\n"))},
		{"patch keeps no final newline", ApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** Update File: noeol.txt\n-one\n+1\n two\n*** End Patch\n"}, ok(content("noeol.txt", "1\ntwo"))},
		// JSON carries U+FFFD where the file has other bytes, as
		// sandbox_read_file shows them: they match, and context lines
		// keep the file's bytes.
		{"patch keeps other bytes", ApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** Update File: latin1.txt\n-caf\uFFFD\n+CAFE\n na\uFFFDve\n*** End Patch\n"}, ok(content("latin1.txt", "CAFE\nna\xefve\n"))},
		{"patch a huge file", ApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** Update File: huge.txt\n-x\n+y\n*** End Patch\n"}, fails(KindInvalidArgument, "MiB are not edited")},
		{"patch out of the workspace", ApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** Update File: ../outside.txt\n-outside\n+patched\n*** End Patch\n"}, ok(content("../outside.txt", "patched\n"))},
		{"patch through a symlink", ApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** Update File: link.txt\n-outside\n+patched\n*** End Patch\n"}, ok(func(f Files) string {
			if fi, err := os.Lstat(filepath.Join(f.Dir, "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				return "the symlink was replaced by a file"
			}
			return content("../outside.txt", "patched\n")(f)
		})},
		// sandbox_read_file out of the workspace (the rest: TestReadFile)
		{"read out of the workspace", ReadFile, map[string]any{"path": "../outside.txt"}, ok(nil)},
		{"read the huge file's start", ReadFile, map[string]any{"path": "huge.txt", "end_line": 2}, ok(nil)},
		// sandbox_delete_file
		{"delete an empty file", DeleteFile, map[string]any{"path": "empty.txt"}, ok(nil)},
		{"delete a symlink, not its target", DeleteFile, map[string]any{"path": "link.txt"}, ok(content("../outside.txt", "outside\n"))},
		{"delete out of the workspace", DeleteFile, map[string]any{"path": "../outside.txt"}, ok(nil)},
		// sandbox_grep_files
		{"grep CRLF and other bytes", GrepFiles, map[string]any{"pattern": "two|na"}, ok(nil)},
		{"grep out of the workspace", GrepFiles, map[string]any{"pattern": "outside", "path": ".."}, ok(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			res, err := call[map[string]any](t, f, tc.tool, tc.args)
			tc.want(t, f, res, err)
		})
	}
}
