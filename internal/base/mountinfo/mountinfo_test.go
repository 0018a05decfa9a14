package mountinfo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011here`:   "/tab\there",
		`/back\134slash`: `/back\slash`,
		`/short\04`:      `/short\04`,
		`/not\999octal`:  `/not\999octal`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnmountUnder mounts two tmpfs, one inside the other, under a
// directory whose name needs escaping, and unmounts both.
func TestUnmountUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "with space")
	inner := filepath.Join(dir, "inner")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = UnmountUnder(dir) })
	if err := os.Mkdir(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("hutch-inner", inner, "tmpfs", unix.MS_NOSUID, "size=1m"); err != nil {
		t.Fatal(err)
	}
	points, err := Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(points, []string{dir, inner}) {
		t.Fatalf("Under(%s) = %q, want the two tmpfs", dir, points)
	}
	m, err := Find(inner)
	if err != nil || m.FSType != "tmpfs" || m.Source != "hutch-inner" || !slices.Contains(strings.Split(m.Options, ","), "nosuid") {
		t.Fatalf("Find(%s) = %+v, %v; want the tmpfs hutch-inner, nosuid", inner, m, err)
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	if points, err := Under(dir); err != nil || len(points) != 0 {
		t.Fatalf("after UnmountUnder: %q, %v; want nothing mounted", points, err)
	}
}

// TestInTree finds what the mount table finds under a tree: a directory
// mounted over, a file bind-mounted onto (on the same filesystem, so the
// device number alone would not tell), and not what is inside a mount.
func TestInTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "tree")
	sub, file, src := filepath.Join(dir, "a", "sub"), filepath.Join(dir, "b", "file"), filepath.Join(dir, "src")
	for _, d := range []string{sub, filepath.Dir(file)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{file, src} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if points, err := InTree(dir); err != nil || len(points) != 0 {
		t.Fatalf("InTree of a tree with no mount = %q, %v; want none", points, err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = UnmountUnder(dir) })
	if err := os.Mkdir(filepath.Join(sub, "inner"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", filepath.Join(sub, "inner"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, file, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	points, err := InTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(points, []string{sub, file}) {
		t.Fatalf("InTree(%s) = %q, want %q (not the mount inside the first)", dir, points, []string{sub, file})
	}
	if points, err := InTree(filepath.Join(dir, "missing")); err != nil || len(points) != 0 {
		t.Fatalf("InTree of no tree = %q, %v; want none", points, err)
	}
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	if points, err := InTree(dir); err != nil || len(points) != 0 {
		t.Fatalf("after UnmountUnder: %q, %v; want nothing mounted", points, err)
	}
}
