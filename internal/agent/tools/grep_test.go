package tools

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func searchTree(t *testing.T) Files {
	return newFiles(t, map[string]string{
		".gitignore":        "build/\n*.log\n!keep.log\n/root-only.txt\n",
		"src/main.go":       "package main\n// TODO: one\nfunc main() {}\n",
		"src/util/util.go":  "package util\n// todo two\n",
		"build/out.go":      "// TODO ignored\n",
		"app.log":           "TODO ignored log\n",
		"keep.log":          "TODO kept\n",
		"root-only.txt":     "TODO ignored at root\n",
		"sub/root-only.txt": "TODO kept in sub\n",
		"sub/.gitignore":    "*.md\n",
		"sub/notes.md":      "TODO ignored md\n",
		"notes.md":          "TODO root md kept\n",
		".hidden/x.go":      "TODO hidden\n",
		"bin.dat":           "\x00TODO",
		"crlf.txt":          "a\r\nTODO crlf\r\nb\r\n",
	})
}

func TestGrepFiles(t *testing.T) {
	f := searchTree(t)
	where := func(r GrepResult) string {
		var out []string
		for _, m := range r.Matches {
			out = append(out, m.Path+":"+strings.Fields(m.Text + " x")[0]+":"+string(rune('0'+m.Line)))
		}
		return strings.Join(out, " ")
	}
	engines := map[string]func(a grepArgs, res *GrepResult) error{
		"builtin": func(a grepArgs, res *GrepResult) error {
			expr := a.Pattern
			if a.CaseInsensitive {
				expr = "(?i)" + expr
			}
			f.fs = osFS{}
			return f.grepTree(f.Dir, regexp.MustCompile(expr), a, res)
		},
		"builtin, confined": func(a grepArgs, res *GrepResult) error {
			f.Confined = true
			raw, err := json.Marshal(a)
			if err != nil {
				return err
			}
			out, err := f.Run(GrepFiles, raw)
			if err == nil {
				*res = out.(GrepResult)
			}
			return err
		},
	}
	if rg, err := exec.LookPath("rg"); err == nil {
		engines["ripgrep"] = func(a grepArgs, res *GrepResult) error { return f.ripgrep(rg, f.Dir, a, res) }
	} else {
		t.Log("no rg here (./setup --deps installs ripgrep): only the built-in search is tested")
	}
	for name, search := range engines {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				args      grepArgs
				want      string
				truncated bool
			}{
				{args: grepArgs{Pattern: "TODO"}, want: "crlf.txt:TODO:2 keep.log:TODO:1 notes.md:TODO:1 src/main.go://:2 sub/root-only.txt:TODO:1"},
				{args: grepArgs{Pattern: "todo", CaseInsensitive: true, Glob: []string{"*.go"}}, want: "src/main.go://:2 src/util/util.go://:2"},
				{args: grepArgs{Pattern: "TODO", Glob: []string{"!*.log", "!*.md"}}, want: "crlf.txt:TODO:2 src/main.go://:2 sub/root-only.txt:TODO:1"},
				{args: grepArgs{Pattern: "TODO", MaxResults: 2}, want: "crlf.txt:TODO:2 keep.log:TODO:1", truncated: true},
			} {
				if tc.args.MaxResults == 0 {
					tc.args.MaxResults = defaultGrepResults
				}
				res := GrepResult{Matches: []GrepMatch{}}
				if err := search(tc.args, &res); err != nil {
					t.Fatalf("%+v: %v", tc.args, err)
				}
				if got := where(res); got != tc.want || res.Truncated != tc.truncated {
					t.Errorf("%+v:\n got %s (truncated %v)\nwant %s (truncated %v)", tc.args, got, res.Truncated, tc.want, tc.truncated)
				}
			}
			res := GrepResult{Matches: []GrepMatch{}}
			if err := search(grepArgs{Pattern: "TODO: one", Context: 1, MaxResults: 10}, &res); err != nil {
				t.Fatal(err)
			}
			want := []GrepMatch{{Path: "src/main.go", Line: 2, Text: "// TODO: one", Before: []string{"package main"}, After: []string{"func main() {}"}}}
			if !reflect.DeepEqual(res.Matches, want) {
				t.Errorf("with context: %+v, want %+v", res.Matches, want)
			}
		})
	}
	// Through the tool: the engine is said, and bad arguments refused.
	res, err := call[GrepResult](t, f, GrepFiles, grepArgs{Pattern: "kept in"})
	if err != nil || len(res.Matches) != 1 || res.Engine == "" {
		t.Errorf("the tool: %+v, %v", res, err)
	}
	for _, args := range []grepArgs{{}, {Pattern: "("}, {Pattern: "x", Context: 9}, {Pattern: "x", MaxResults: 5000}, {Pattern: "x", Glob: []string{"["}}} {
		if _, err := call[GrepResult](t, f, GrepFiles, args); kindOf(err) != KindInvalidArgument {
			t.Errorf("%+v: %v, want invalid_argument", args, err)
		}
	}
	if _, err := call[GrepResult](t, f, GrepFiles, grepArgs{Pattern: "x", Path: "nowhere"}); kindOf(err) != KindNotFound {
		t.Errorf("a missing path: %v, want not_found", err)
	}
}

func TestFindFiles(t *testing.T) {
	f := searchTree(t)
	first := func(query string) (string, int) {
		res, err := call[FindResult](t, f, FindFiles, findArgs{Query: query})
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if len(res.Files) == 0 {
			return "", 0
		}
		return res.Files[0].Path, len(res.Files)
	}
	for query, want := range map[string]string{
		"util":      "src/util/util.go",
		"main":      "src/main.go",
		"srcmn":     "src/main.go",
		"root only": "sub/root-only.txt",
	} {
		if got, _ := first(query); got != want {
			t.Errorf("%q: first %q, want %q", query, got, want)
		}
	}
	if got, n := first("zzzz"); n != 0 {
		t.Errorf("a query matching nothing found %q", got)
	}
	// keep.log, notes.md, src/main.go, src/util/util.go, sub/root-only.txt;
	// not the hidden or ignored ones.
	if _, n := first("o"); n != 5 {
		t.Errorf("files with an o: %d, want 5", n)
	}
	if _, err := call[FindResult](t, f, FindFiles, findArgs{}); kindOf(err) != KindInvalidArgument {
		t.Errorf("no query: %v", err)
	}
}
