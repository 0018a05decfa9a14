package api

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/security.md is the threat model: every listener and route group
// with the boundary it sits on, and the attack tests of each boundary.
// These tests keep it so: a new route, or a new attack test, that the
// page does not name fails the build, as does a test the page names that
// is gone.

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../../.."

const securityDoc = repoRoot + "/docs/security.md"

// A route group is a route's path up to the object it acts on: the part
// after /v1/sandboxes/{id}/ for a sandbox's routes (written `/files`, or
// in full), /v1/NAME for the rest, and a route outside /v1 in full.
func TestSecurityDocCoversRoutes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, rt := range (&Server{}).routes() {
		_, p, _ := strings.Cut(rt.pattern, " ")
		var want []string
		if rest, ok := strings.CutPrefix(p, "/v1/sandboxes/{id}/"); ok {
			seg, _, _ := strings.Cut(rest, "/")
			want = []string{"`/" + seg, "/v1/sandboxes/{id}/" + seg}
		} else {
			parts := strings.SplitN(p, "/", 4)
			want = []string{"`" + p + "`"} // a path of its own: /metrics
			if len(parts) > 2 {
				want = []string{"/" + parts[1] + "/" + parts[2]}
			}
		}
		if !slices.ContainsFunc(want, func(s string) bool { return strings.Contains(doc, s) }) {
			t.Errorf("route %s: docs/security.md's listener table names none of %q", rt.pattern, want)
		}
	}
	for _, p := range []string{mcpPath, "/v1/sandboxes/{id}/ports/{port}/", "/assets/", "/e2b/"} {
		if !strings.Contains(doc, p) {
			t.Errorf("docs/security.md does not name %s", p)
		}
	}
}

// Every TestAttack test of the repository is named on the page, and every
// one it names exists.
func TestSecurityDocTests(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`TestAttack[A-Z][A-Za-z0-9_]*`)
	named := map[string]bool{}
	for _, n := range name.FindAllString(string(b), -1) {
		named[n] = true
	}
	decl := regexp.MustCompile(`(?m)^func (TestAttack[A-Za-z0-9_]*)\(`)
	defined := map[string]bool{}
	err = filepath.WalkDir(repoRoot, func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case e.IsDir() && (e.Name() == "node_modules" || e.Name() == ".git" || e.Name() == "testdata"):
			return filepath.SkipDir
		case e.IsDir() || !strings.HasSuffix(p, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(p) // #nosec G304 -- the repository's own tests
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range defined {
		if !named[n] {
			t.Errorf("%s is not named in docs/security.md: name it under the boundary it attacks", n)
		}
	}
	for n := range named {
		if !defined[n] {
			t.Errorf("docs/security.md names %s, which no test defines", n)
		}
	}
}
