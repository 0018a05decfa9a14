package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newFiles makes a workspace in a temporary directory with the given
// files (path → content), and Files working in it.
func newFiles(t *testing.T, files map[string]string) Files {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Files{Dir: dir, UID: os.Getuid(), GID: os.Getgid()}
}

// call runs tool name with args (marshalled to JSON) and decodes its
// result into R.
func call[R any](t *testing.T, f Files, name string, args any) (R, error) {
	t.Helper()
	var r R
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(name, raw)
	if err != nil {
		return r, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r, nil
}

// kindOf is the kind of a tool error, or "" for none.
func kindOf(err error) string {
	var te *Error
	if errors.As(err, &te) {
		return te.Kind
	}
	if err != nil {
		return "not a tool error: " + err.Error()
	}
	return ""
}

func readBack(t *testing.T, f Files, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.Dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadFile(t *testing.T) {
	var huge strings.Builder
	for i := range 5000 {
		huge.WriteString(strings.Repeat("x", i%7) + "\n")
	}
	f := newFiles(t, map[string]string{
		"empty.txt":   "",
		"crlf.txt":    "one\r\ntwo\r\n",
		"mixed.txt":   "one\r\ntwo\n",
		"noeol.txt":   "one\ntwo",
		"latin1.txt":  "caf\xe9 cr\xe8me\n",
		"image.png":   "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"huge.txt":    huge.String(),
		"long.txt":    strings.Repeat("y", 100_000) + "\nshort\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
	})
	if err := os.Symlink(filepath.Join(f.Dir, "noeol.txt"), filepath.Join(f.Dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	total := func(n int) *int { return &n }
	for _, tc := range []struct {
		name string
		args readArgs
		want ReadResult // the fields compared: Content, EndLine, TotalLines, flags
		kind string
	}{
		{name: "empty file", args: readArgs{Path: "empty.txt"}, want: ReadResult{TotalLines: total(0), Note: "the file is empty"}},
		{name: "CRLF", args: readArgs{Path: "crlf.txt"}, want: ReadResult{Content: "     1\tone\n     2\ttwo\n", EndLine: 2, TotalLines: total(2), LineEndings: "crlf"}},
		{name: "mixed endings", args: readArgs{Path: "mixed.txt"}, want: ReadResult{Content: "     1\tone\n     2\ttwo\n", EndLine: 2, TotalLines: total(2), LineEndings: "mixed"}},
		{name: "no trailing newline", args: readArgs{Path: "noeol.txt"}, want: ReadResult{Content: "     1\tone\n     2\ttwo\n", EndLine: 2, TotalLines: total(2), NoFinalNewline: true}},
		{name: "not UTF-8", args: readArgs{Path: "latin1.txt"}, want: ReadResult{Content: "     1\tcaf\uFFFD cr\uFFFDme\n", EndLine: 1, TotalLines: total(1), NotUTF8: true}},
		{name: "binary", args: readArgs{Path: "image.png"}, want: ReadResult{Binary: true, Note: "binary file of 16 bytes (image/png); not shown"}},
		{name: "a range", args: readArgs{Path: "src/main.go", StartLine: 2, EndLine: 3}, want: ReadResult{Content: "     2\t\n     3\tfunc main() {}\n", EndLine: 3, TotalLines: total(3)}},
		{name: "past the end", args: readArgs{Path: "src/main.go", StartLine: 9}, want: ReadResult{TotalLines: total(3), Note: "start_line 9 is past the end of the file"}},
		{name: "huge file", args: readArgs{Path: "huge.txt"}, want: ReadResult{EndLine: 2000, TotalLines: total(5000), Truncated: true, NextStartLine: 2001}},
		{name: "huge file, later part", args: readArgs{Path: "huge.txt", StartLine: 4999}, want: ReadResult{Content: "  4999\t\n  5000\tx\n", EndLine: 5000, TotalLines: total(5000)}},
		{name: "long line cut", args: readArgs{Path: "long.txt"}, want: ReadResult{Content: "     1\t" + strings.Repeat("y", maxLineBytes) + " … (line cut at 4000 bytes)\n     2\tshort\n", EndLine: 2, TotalLines: total(2)}},
		{name: "through a symlink", args: readArgs{Path: "link.txt"}, want: ReadResult{Content: "     1\tone\n     2\ttwo\n", EndLine: 2, TotalLines: total(2), NoFinalNewline: true}},
		{name: "absolute path", args: readArgs{Path: filepath.Join(f.Dir, "noeol.txt"), EndLine: 1}, want: ReadResult{Content: "     1\tone\n", EndLine: 1, TotalLines: total(2), NoFinalNewline: true}},
		{name: "missing", args: readArgs{Path: "nope.txt"}, kind: KindNotFound},
		{name: "a directory", args: readArgs{Path: "src"}, kind: KindInvalidArgument},
		{name: "no path", args: readArgs{}, kind: KindInvalidArgument},
		{name: "end before start", args: readArgs{Path: "noeol.txt", StartLine: 2, EndLine: 1}, kind: KindInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call[ReadResult](t, f, ReadFile, tc.args)
			if kindOf(err) != tc.kind {
				t.Fatalf("error %v, want kind %q", err, tc.kind)
			}
			if tc.kind != "" {
				return
			}
			if tc.name == "huge file" {
				got.Content = "" // 2000 lines; their number is what matters
			}
			if got.Content != tc.want.Content || got.EndLine != tc.want.EndLine || (got.TotalLines == nil) != (tc.want.TotalLines == nil) ||
				got.TotalLines != nil && *got.TotalLines != *tc.want.TotalLines || got.Truncated != tc.want.Truncated ||
				got.NextStartLine != tc.want.NextStartLine || got.LineEndings != tc.want.LineEndings || got.NoFinalNewline != tc.want.NoFinalNewline ||
				got.NotUTF8 != tc.want.NotUTF8 || got.Binary != tc.want.Binary || got.Note != tc.want.Note {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	f := newFiles(t, map[string]string{"script.sh": "old"})
	if err := os.Chmod(filepath.Join(f.Dir, "script.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := call[WriteResult](t, f, WriteFile, map[string]any{"path": "deep/new/file.txt", "content": "hello\n"})
	if err != nil || !res.Created || res.Bytes != 6 || readBack(t, f, "deep/new/file.txt") != "hello\n" {
		t.Errorf("a new file with parents: %+v, %v", res, err)
	}
	res, err = call[WriteResult](t, f, WriteFile, map[string]any{"path": "script.sh", "content": "#!/bin/sh\n"})
	if err != nil || res.Created {
		t.Fatalf("overwrite: %+v, %v", res, err)
	}
	if fi, _ := os.Stat(filepath.Join(f.Dir, "script.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("an overwritten file has mode %v, want its 0755 kept", fi.Mode())
	}
	if err := os.Symlink("script.sh", filepath.Join(f.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := call[WriteResult](t, f, WriteFile, map[string]any{"path": "link", "content": "through"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(f.Dir, "link")); fi.Mode()&os.ModeSymlink == 0 || readBack(t, f, "script.sh") != "through" {
		t.Error("a write to a symlink did not go through it")
	}
	if _, err := call[WriteResult](t, f, WriteFile, map[string]any{"path": "empty", "content": ""}); err != nil || readBack(t, f, "empty") != "" {
		t.Errorf("an empty file: %v", err)
	}
	for name, args := range map[string]map[string]any{
		"a directory":        {"path": "deep", "content": "x"},
		"no content":         {"path": "x.txt"},
		"an unknown field":   {"path": "x.txt", "content": "x", "mode": "0600"},
		"under a file":       {"path": "script.sh/x", "content": "x"},
		"a NUL in the path":  {"path": "a\x00b", "content": "x"},
		"content not string": {"path": "x.txt", "content": 5},
	} {
		if _, err := call[WriteResult](t, f, WriteFile, args); kindOf(err) != KindInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(f.Dir, ".*hutch*")); len(entries) > 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestFindReplace(t *testing.T) {
	f := newFiles(t, map[string]string{
		"a.py":     "x = 1\ny = 2\nx = 1\n",
		"crlf.txt": "one\r\ntwo\r\n",
		"bin":      "\x00\x01",
	})
	do := func(args map[string]any) (FindReplaceResult, error) {
		return call[FindReplaceResult](t, f, FindReplace, args)
	}
	if _, err := do(map[string]any{"path": "a.py", "find": "x = 1", "replace": "x = 3"}); kindOf(err) != KindInvalidArgument || !strings.Contains(err.Error(), "2 times, starting on lines [1 3]") {
		t.Errorf("ambiguous: %v", err)
	}
	if res, err := do(map[string]any{"path": "a.py", "find": "y = 2", "replace": "y = 5"}); err != nil || res.Replacements != 1 || readBack(t, f, "a.py") != "x = 1\ny = 5\nx = 1\n" {
		t.Errorf("unique: %+v, %v", res, err)
	}
	if res, err := do(map[string]any{"path": "a.py", "find": "x = 1", "replace": "", "replace_all": true}); err != nil || res.Replacements != 2 || readBack(t, f, "a.py") != "\ny = 5\n\n" {
		t.Errorf("replace_all: %+v, %v", res, err)
	}
	if _, err := do(map[string]any{"path": "a.py", "find": "zzz", "replace": "q"}); kindOf(err) != KindInvalidArgument || !strings.Contains(err.Error(), "not in") {
		t.Errorf("not found: %v", err)
	}
	if _, err := do(map[string]any{"path": "crlf.txt", "find": "one\ntwo", "replace": "q"}); err == nil || !strings.Contains(err.Error(), `\r\n`) {
		t.Errorf("CRLF: %v, want a hint about the line endings", err)
	}
	if res, err := do(map[string]any{"path": "crlf.txt", "find": "one\r\n", "replace": "uno\r\n"}); err != nil || res.Replacements != 1 || readBack(t, f, "crlf.txt") != "uno\r\ntwo\r\n" {
		t.Errorf("CRLF exact: %+v, %v", res, err)
	}
	for name, args := range map[string]map[string]any{
		"binary":     {"path": "bin", "find": "\x01", "replace": "x"},
		"empty find": {"path": "a.py", "find": "", "replace": "x"},
		"no replace": {"path": "a.py", "find": "y"},
	} {
		if _, err := do(args); kindOf(err) != KindInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	if _, err := do(map[string]any{"path": "missing.py", "find": "a", "replace": "b"}); kindOf(err) != KindNotFound {
		t.Errorf("missing file: %v", err)
	}
}

func TestDeleteFile(t *testing.T) {
	f := newFiles(t, map[string]string{"a.txt": "a", "dir/b.txt": "b", "keep.txt": "k"})
	if err := os.Mkdir(filepath.Join(f.Dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.Dir, "keep.txt"), filepath.Join(f.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     deleteArgs
		wantType string
		kind     string
	}{
		{args: deleteArgs{Path: "a.txt"}, wantType: "file"},
		{args: deleteArgs{Path: "empty"}, wantType: "dir"},
		{args: deleteArgs{Path: "dir"}, kind: KindInvalidArgument},
		{args: deleteArgs{Path: "dir", Recursive: true}, wantType: "dir"},
		{args: deleteArgs{Path: "link"}, wantType: "symlink"},
		{args: deleteArgs{Path: "missing"}, kind: KindNotFound},
		{args: deleteArgs{Path: "/", Recursive: true}, kind: KindInvalidArgument},
		{args: deleteArgs{Path: f.Dir, Recursive: true}, kind: KindInvalidArgument},
	} {
		res, err := call[DeleteResult](t, f, DeleteFile, tc.args)
		if kindOf(err) != tc.kind || err == nil && res.Type != tc.wantType {
			t.Errorf("delete %+v: %+v, %v; want %q or kind %q", tc.args, res, err, tc.wantType, tc.kind)
		}
		if err == nil {
			if _, err := os.Lstat(filepath.Join(f.Dir, tc.args.Path)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s is still there", tc.args.Path)
			}
		}
	}
	if readBack(t, f, "keep.txt") != "k" {
		t.Error("deleting a symlink touched its target")
	}
}

func TestListDirectory(t *testing.T) {
	f := newFiles(t, map[string]string{"a.txt": "abc", "src/main.go": "x", "src/pkg/deep.go": "y"})
	if err := os.Symlink("/", filepath.Join(f.Dir, "root")); err != nil {
		t.Fatal(err)
	}
	paths := func(r ListResult) string {
		var out []string
		for _, e := range r.Entries {
			out = append(out, e.Path+":"+e.Type)
		}
		return strings.Join(out, " ")
	}
	res, err := call[ListResult](t, f, ListDirectory, listArgs{})
	if err != nil || paths(res) != "a.txt:file root:symlink src:dir" || res.Entries[0].Size != 3 {
		t.Errorf("depth 1: %+v, %v", res, err)
	}
	res, err = call[ListResult](t, f, ListDirectory, listArgs{Path: ".", Depth: 2})
	if err != nil || paths(res) != "a.txt:file root:symlink src:dir src/main.go:file src/pkg:dir" {
		t.Errorf("depth 2: %s, %v", paths(res), err)
	}
	for _, args := range []listArgs{{Path: "a.txt"}, {Depth: 9}} {
		if _, err := call[ListResult](t, f, ListDirectory, args); kindOf(err) != KindInvalidArgument {
			t.Errorf("%+v: %v, want invalid_argument", args, err)
		}
	}
	for i := range maxListEntries + 5 {
		if err := os.WriteFile(filepath.Join(f.Dir, "src", fmt.Sprintf("many%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := call[ListResult](t, f, ListDirectory, listArgs{Path: "src"}); err != nil || !res.Truncated || len(res.Entries) != maxListEntries {
		t.Errorf("a big directory: %d entries, truncated %v, %v", len(res.Entries), res.Truncated, err)
	}
}
