package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

// A rule finds the edges it forbids, direct or not, and only those.
func TestViolations(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}
	const pkg = "github.com/hutchdev/hutch/internal/deptest"
	for _, tc := range []struct {
		name string
		rule Rule
		want []string // substrings of the violations, in any order
	}{
		{"direct import", Rule{Package: pkg, Direct: true, Bad: map[string]string{"os/exec": "no"}}, []string{"imports os/exec: no"}},
		{"a tree", Rule{Package: pkg, Bad: map[string]string{"internal/...": "no"}}, []string{"imports internal/"}},
		{"not imported", Rule{Package: pkg, Bad: map[string]string{"net/http": "no"}}, nil},
		{"deeper, but direct only", Rule{Package: pkg, Direct: true, Bad: map[string]string{"syscall": "no"}}, nil},
		{"deeper", Rule{Package: pkg, Bad: map[string]string{"syscall": "no"}}, []string{"imports syscall"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := violations(goBin, tc.rule)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && len(got) > 0 {
				t.Errorf("violations %q, want none", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					t.Errorf("violations %q, want one with %q", got, w)
				}
			}
		})
	}
}

// A confinement finds the importers it does not allow, and only those.
func TestTrespassers(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}
	const module = "github.com/hutchdev/hutch/internal/deptest/..."
	for _, tc := range []struct {
		name string
		c    Confinement
		want []string
	}{
		{"an importer not allowed", Confinement{Tree: "os/exec", Why: "no", Module: module}, []string{"internal/deptest imports os/exec: no"}},
		{"the importer allowed", Confinement{Tree: "os/...", Importers: []string{"github.com/hutchdev/hutch/internal/..."}, Module: module}, nil},
		{"a test's import", Confinement{Tree: "testing", Module: module}, []string{"imports testing"}},
		{"not imported", Confinement{Tree: "net/http", Module: module}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trespassers(goBin, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && len(got) > 0 {
				t.Errorf("trespassers %q, want none", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.Join(got, "\n"), w) {
					t.Errorf("trespassers %q, want one with %q", got, w)
				}
			}
		})
	}
}
