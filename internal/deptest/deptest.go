// Package deptest holds the layering rules to account in tests: a package
// that must not reach another says so in a test of its own, which fails
// on the first edge that breaks the rule (Tailscale's tstest/deptest is
// the model). The rules are what keeps the folders telling the
// architecture: the agent imports nothing daemon-side, runtimes know
// nothing of HTTP, the store or the agent's code, the CLI never opens the
// store, and so on.
package deptest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// Rule forbids one package some others.
type Rule struct {
	// Package is the import path checked ("./" paths are relative to the
	// test's package directory, as go list takes them).
	Package string
	// Direct limits the rule to the package's own imports; otherwise every
	// package it depends on, however far, is checked.
	Direct bool
	// Bad are import paths (a trailing "/..." takes a whole tree) with
	// why each is forbidden.
	Bad map[string]string
}

// Check fails t for every dependency of r.Package that r forbids.
func Check(t *testing.T, r Rule) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the dependency rules need the go command in PATH")
	}
	found, err := violations(goBin, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Error(v)
	}
}

// violations lists r's broken edges, each saying why it is forbidden.
func violations(goBin string, r Rule) ([]string, error) {
	format := "{{join .Deps \"\\n\"}}"
	if r.Direct {
		format = "{{join .Imports \"\\n\"}}"
	}
	// #nosec G204 -- the go command, with a package path from a test
	out, err := exec.Command(goBin, "list", "-f", format, r.Package).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", r.Package, err)
	}
	var found []string
	for _, dep := range strings.Fields(string(out)) {
		for bad, why := range r.Bad {
			if matches(bad, dep) {
				found = append(found, fmt.Sprintf("%s imports %s: %s", r.Package, dep, why))
			}
		}
	}
	return found, nil
}

// matches reports whether pattern (a path, or a tree ending in "/...")
// covers path.
func matches(pattern, path string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == pattern
}
