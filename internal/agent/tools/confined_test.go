package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Confined (the host's tool calls), the tools work as they do in a
// sandbox on what is in Dir, symlinks in it that stay in it included,
// absolute ones too; every way out of it is refused, and what the tools
// do leaves the rest of the machine as it was.
func TestConfined(t *testing.T) {
	setup := func(t *testing.T) (Files, string) {
		f := newFiles(t, map[string]string{"ws/a.txt": "one\n", "ws/sub/b.txt": "two\n", "secret.txt": "secret\n"})
		outer := f.Dir
		f.Dir, f.Confined = filepath.Join(outer, "ws"), true
		for link, target := range map[string]string{
			"rel-link": "a.txt", "abs-link": filepath.Join(f.Dir, "a.txt"), "abs-dir": filepath.Join(f.Dir, "sub"),
			"out-link": "../secret.txt", "out-abs": filepath.Join(outer, "secret.txt"), "out-dir": outer, "sub/loop": "loop",
		} {
			if err := os.Symlink(target, filepath.Join(f.Dir, link)); err != nil {
				t.Fatal(err)
			}
		}
		return f, outer
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	patch := func(body string) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n" + body + "*** End Patch\n"}
	}
	tests := []struct {
		name  string
		tool  string
		args  map[string]any
		kind  string
		check func(f Files, res string) string // "" when all is well
	}{
		{"read, a relative symlink in", ReadFile, map[string]any{"path": "rel-link"}, "", func(_ Files, res string) string {
			return cond(strings.Contains(res, `1\tone`), "", res)
		}},
		{"read, an absolute symlink in", ReadFile, map[string]any{"path": "abs-link"}, "", nil},
		{"read, through an absolute dir symlink in", ReadFile, map[string]any{"path": "abs-dir/b.txt"}, "", nil},
		{"read, absolute in", ReadFile, map[string]any{"path": "/" + "{dir}/a.txt"}, "", nil},
		{"write, through an absolute symlink in", WriteFile, map[string]any{"path": "abs-link", "content": "new"}, "", func(f Files, _ string) string {
			fi, err := os.Lstat(filepath.Join(f.Dir, "abs-link"))
			return cond(read(filepath.Join(f.Dir, "a.txt")) == "new" && err == nil && fi.Mode()&os.ModeSymlink != 0, "", "a.txt is "+read(filepath.Join(f.Dir, "a.txt")))
		}},
		{"write, a new file through an absolute dir symlink", WriteFile, map[string]any{"path": "abs-dir/new/c.txt", "content": "c"}, "", func(f Files, _ string) string {
			return cond(read(filepath.Join(f.Dir, "sub/new/c.txt")) == "c", "", "sub/new/c.txt is "+read(filepath.Join(f.Dir, "sub/new/c.txt")))
		}},
		{"patch, through symlinks in", ApplyPatch, patch("*** Update File: rel-link\n@@\n-one\n+uno\n*** Add File: abs-dir/d.txt\n+d\n*** Update File: abs-dir/b.txt\n*** Move to: moved.txt\n@@\n-two\n+dos\n"), "", func(f Files, _ string) string {
			got := read(filepath.Join(f.Dir, "a.txt")) + read(filepath.Join(f.Dir, "sub/d.txt")) + read(filepath.Join(f.Dir, "moved.txt"))
			return cond(got == "uno\nd\ndos\n", "", "after the patch: "+got)
		}},
		{"delete, a symlink out (the link, not its target)", DeleteFile, map[string]any{"path": "out-link"}, "", func(f Files, _ string) string {
			_, err := os.Lstat(filepath.Join(f.Dir, "out-link"))
			return cond(os.IsNotExist(err), "", "the link is still there")
		}},
		{"list, through an absolute dir symlink", ListDirectory, map[string]any{"path": "abs-dir"}, "", func(_ Files, res string) string {
			return cond(strings.Contains(res, "b.txt"), "", res)
		}},
		{"grep, the tree: links out are not followed", GrepFiles, map[string]any{"pattern": "secret|one"}, "", func(_ Files, res string) string {
			return cond(strings.Contains(res, `"a.txt"`) && !strings.Contains(res, `"text":"secret"`), "", res)
		}},
		{"find, the tree", FindFiles, map[string]any{"query": "txt"}, "", func(_ Files, res string) string {
			return cond(strings.Contains(res, "sub/b.txt"), "", res)
		}},
		{"read, a symlink loop", ReadFile, map[string]any{"path": "sub/loop"}, KindFailed, nil},
		{"read, a relative symlink out", ReadFile, map[string]any{"path": "out-link"}, KindBlockedByPolicy, nil},
		{"read, an absolute symlink out", ReadFile, map[string]any{"path": "out-abs"}, KindBlockedByPolicy, nil},
		{"read, through a dir symlink out", ReadFile, map[string]any{"path": "out-dir/secret.txt"}, KindBlockedByPolicy, nil},
		{"read, ..", ReadFile, map[string]any{"path": "../secret.txt"}, KindBlockedByPolicy, nil},
		{"read, absolute out", ReadFile, map[string]any{"path": "{outer}/secret.txt"}, KindBlockedByPolicy, nil},
		{"write, through a symlink out", WriteFile, map[string]any{"path": "out-abs", "content": "pwned"}, KindBlockedByPolicy, nil},
		{"write, through a dir symlink out", WriteFile, map[string]any{"path": "out-dir/new.txt", "content": "pwned"}, KindBlockedByPolicy, nil},
		{"replace, through a symlink out", FindReplace, map[string]any{"path": "out-link", "find": "secret", "replace": "pwned"}, KindBlockedByPolicy, nil},
		{"patch, through a symlink out", ApplyPatch, patch("*** Update File: out-link\n@@\n-secret\n+pwned\n"), KindBlockedByPolicy, nil},
		{"patch, an add through a dir symlink out", ApplyPatch, patch("*** Add File: out-dir/new.txt\n+pwned\n"), KindBlockedByPolicy, nil},
		{"patch, a move out", ApplyPatch, patch("*** Update File: a.txt\n*** Move to: ../moved.txt\n@@\n-one\n+x\n"), KindBlockedByPolicy, nil},
		{"delete, through a dir symlink out", DeleteFile, map[string]any{"path": "out-dir/secret.txt"}, KindBlockedByPolicy, nil},
		{"delete, the directory itself", DeleteFile, map[string]any{"path": ".", "recursive": true}, KindInvalidArgument, nil},
		{"list, a dir symlink out", ListDirectory, map[string]any{"path": "out-dir"}, KindBlockedByPolicy, nil},
		{"grep, a dir symlink out", GrepFiles, map[string]any{"pattern": "secret", "path": "out-dir"}, KindBlockedByPolicy, nil},
		{"find, ..", FindFiles, map[string]any{"query": "secret", "path": ".."}, KindBlockedByPolicy, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, outer := setup(t)
			raw, err := json.Marshal(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			raw = []byte(strings.NewReplacer("/{dir}", f.Dir, "{outer}", outer).Replace(string(raw)))
			res, err := f.Run(tc.tool, raw)
			if kindOf(err) != tc.kind {
				t.Fatalf("error %v, want kind %q", err, tc.kind)
			}
			out, _ := json.Marshal(res)
			if strings.Contains(string(out), "secret\\n") || err != nil && strings.Contains(err.Error(), "secret\n") {
				t.Errorf("the secret came back: %s %v", out, err)
			}
			if tc.check != nil {
				if why := tc.check(f, string(out)); why != "" {
					t.Error(why)
				}
			}
			entries, _ := os.ReadDir(outer)
			if got := read(filepath.Join(outer, "secret.txt")); got != "secret\n" || len(entries) != 2 {
				t.Errorf("out of the directory after the call: secret.txt is %q, %d entries", got, len(entries))
			}
		})
	}
}

func cond(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
