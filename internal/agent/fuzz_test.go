package agent

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzResolvePath: every path a call names resolves to one absolute,
// clean path, or is refused; a relative one without ".." stays in the
// home directory it is relative to.
func FuzzResolvePath(f *testing.F) {
	for _, p := range []string{"", "~", "~/a/b", "~root", "a/../../etc", "/etc/../x", "./x//y/", "..", "a\x00b"} {
		f.Add(p)
	}
	acct := account{Name: "user", UID: 1000, GID: 1000, Home: "/home/user"}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := resolvePath(p, acct)
		if err != nil {
			if !strings.HasPrefix(p, "~") {
				t.Fatalf("%q refused: %v", p, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("%q resolved to %q, not an absolute clean path", p, got)
		}
		rel := strings.TrimPrefix(p, "~/")
		if !filepath.IsAbs(rel) && !slices.Contains(strings.Split(rel, "/"), "..") &&
			got != acct.Home && !strings.HasPrefix(got, acct.Home+"/") {
			t.Fatalf("%q resolved to %q, outside the home %s", p, got, acct.Home)
		}
	})
}
