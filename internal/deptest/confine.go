package deptest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// Confinement keeps a tree of packages to the importers allowed it: the
// rule of a package that only its neighbours may use, checked over the
// whole module, tests included.
type Confinement struct {
	// Tree is the import path kept (a trailing "/..." takes a whole tree).
	Tree string
	// Importers are the paths (or "/..." trees) allowed to import it.
	Importers []string
	// Why it is kept.
	Why string
	// Module is the pattern of the packages checked
	// ("github.com/hutchdev/hutch/..." when empty).
	Module string
}

// CheckConfined fails t for every package of c.Module that imports c.Tree
// directly, in its code or its tests, without being one of c.Importers.
func CheckConfined(t *testing.T, c Confinement) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the dependency rules need the go command in PATH")
	}
	found, err := trespassers(goBin, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Error(v)
	}
}

// trespassers lists the imports of c.Tree by packages c does not allow.
func trespassers(goBin string, c Confinement) ([]string, error) {
	module := c.Module
	if module == "" {
		module = "github.com/hutchdev/hutch/..."
	}
	// One line per package: its path, then everything it and its tests
	// import.
	const format = `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`
	// #nosec G204 -- the go command, with a package pattern from a test
	out, err := exec.Command(goBin, "list", "-f", format, module).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", module, err)
	}
	var found []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || allowed(c.Importers, fields[0]) {
			continue
		}
		seen := map[string]bool{}
		for _, imp := range fields[1:] {
			if matches(c.Tree, imp) && !seen[imp] {
				seen[imp] = true
				found = append(found, fmt.Sprintf("%s imports %s: %s", fields[0], imp, c.Why))
			}
		}
	}
	return found, nil
}

func allowed(importers []string, pkg string) bool {
	for _, a := range importers {
		if matches(a, pkg) {
			return true
		}
	}
	return false
}
