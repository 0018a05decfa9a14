package layerdiff

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree writes a layer: "path" → content; "path/" a directory; "path@"
// a symbolic link to content; "path!" a whiteout; "path/+" an opaque
// directory.
func tree(t *testing.T, dir string, entries map[string]string) {
	t.Helper()
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range entries {
			if !yield(p) {
				return
			}
		}
	}) {
		content := entries[p]
		full := filepath.Join(dir, strings.TrimRight(p, "/+@!"))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/+"):
			if err = os.MkdirAll(full, 0o755); err == nil {
				err = unix.Setxattr(full, "trusted.overlay.opaque", []byte("y"), 0)
			}
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasSuffix(p, "@"):
			err = os.Symlink(content, full)
		case strings.HasSuffix(p, "!"):
			err = unix.Mknod(full, unix.S_IFCHR, 0)
		default:
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// mounted is what an overlay mount of r shows, walked whole: path →
// type and content, the oracle Diff must agree with.
func mounted(t *testing.T, r Root) map[string]string {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, "lowerdir="+r.Upper+":"+r.Lower); err != nil {
		t.Skipf("overlayfs: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	out := map[string]string{}
	err := filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == mnt {
			return err
		}
		rel := strings.TrimPrefix(p, mnt)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "symlink " + target
			return err
		case d.IsDir():
			out[rel] = "dir " + info.Mode().String()
		default:
			b, err := os.ReadFile(p)
			out[rel] = "file " + info.Mode().String() + " " + string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// oracle is the diff of two mounted trees.
func oracle(before, after map[string]string) []string {
	var out []string
	for p, a := range before {
		if b, ok := after[p]; !ok {
			out = append(out, p+" removed")
		} else if a != b && !(strings.HasPrefix(a, "dir") && strings.HasPrefix(b, "dir") && a == b) {
			if strings.Fields(a)[0] != strings.Fields(b)[0] {
				out = append(out, p+" removed", p+" added")
			} else {
				out = append(out, p+" changed")
			}
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, p+" added")
		}
	}
	slices.Sort(out)
	return out
}

func TestDiffAgreesWithOverlayfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: whiteouts, trusted xattrs and an overlay mount")
	}
	dir := t.TempDir()
	lower, before, after := filepath.Join(dir, "lower"), filepath.Join(dir, "before"), filepath.Join(dir, "after")
	tree(t, lower, map[string]string{
		"etc/os-release": "debian",
		"etc/hosts":      "localhost",
		"usr/lib/a":      "a",
		"usr/lib/b":      "b",
		"usr/share/":     "",
		"home/user/":     "",
		"opt/tool/bin":   "tool",
	})
	tree(t, before, map[string]string{
		"home/user/project/main.py":   "print(1)",
		"home/user/project/README":    "readme",
		"home/user/project/data/big":  strings.Repeat("x", 1000),
		"home/user/same-content":      "same",
		"home/user/link@":             "/etc/shadow",
		"etc/hosts":                   "localhost sandbox",
		"usr/lib/a!":                  "",
		"tmp/scratch":                 "s",
		"home/user/unchanged-by-both": "u",
	})
	tree(t, after, map[string]string{
		"home/user/project/main.py":   "print(2)",
		"home/user/project/new.txt":   "new",
		"home/user/same-content":      "same", // written again, same bytes
		"home/user/link@":             "/etc/passwd",
		"usr/lib/+":                   "", // opaque: a, b gone
		"usr/lib/c":                   "c",
		"opt/tool!":                   "", // a lower directory removed
		"tmp/scratch/":                "", // a file became a directory
		"tmp/scratch/inner":           "i",
		"home/user/unchanged-by-both": "u",
	})
	if err := os.Chmod(filepath.Join(after, "home/user/unchanged-by-both"), 0o600); err != nil {
		t.Fatal(err)
	}

	a, b := Root{Upper: before, Lower: lower}, Root{Upper: after, Lower: lower}
	changes, err := Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Path+" "+c.Kind)
	}
	slices.Sort(got)
	want := oracle(mounted(t, a), mounted(t, b))
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n  %s\nthe mounted trees' diff:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// And back: the other way round, added and removed swap.
	back, err := Diff(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(changes) {
		t.Errorf("the diff back has %d changes, the diff %d", len(back), len(changes))
	}
	if same, err := Diff(b, b); err != nil || len(same) != 0 {
		t.Errorf("a root against itself: %v, %v", same, err)
	}
}

// ReadFile reads what the view shows and never follows a link: not as the
// file, not as a directory on the way.
func TestReadFileFollowsNoLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: whiteouts")
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	lower, upper := filepath.Join(dir, "lower"), filepath.Join(dir, "upper")
	tree(t, lower, map[string]string{"etc/hosts": "localhost", "etc/gone": "x"})
	tree(t, upper, map[string]string{
		"home/user/notes":   "mine",
		"home/user/escape@": secret,
		"home/user/up@":     dir,
		"etc/gone!":         "",
	})
	r := Root{Upper: upper, Lower: lower}
	for p, want := range map[string]string{"/home/user/notes": "mine", "/etc/hosts": "localhost", "../../etc/hosts": "localhost"} {
		if got, found, err := ReadFile(r, p, 1<<20); err != nil || !found || string(got) != want {
			t.Errorf("ReadFile(%s) = %q, %v, %v; want %q", p, got, found, err, want)
		}
	}
	if _, found, err := ReadFile(r, "/etc/gone", 1<<20); found || err != nil {
		t.Errorf("a whited out file: found %v, %v", found, err)
	}
	if got, _, err := ReadFile(r, "/home/user/escape", 1<<20); !errors.Is(err, ErrNotFile) || bytes.Contains(got, []byte("secret")) {
		t.Errorf("a link to a host file: %q, %v; want ErrNotFile", got, err)
	}
	if got, found, err := ReadFile(r, "/home/user/up/secret", 1<<20); found || bytes.Contains(got, []byte("secret")) {
		t.Errorf("through a linked directory: %q, %v, %v; want nothing", got, found, err)
	}
	if _, _, err := ReadFile(r, "/home/user/notes", 2); err == nil {
		t.Error("a file over the limit was read")
	}
	// An undo's archive holds the links as links.
	var buf bytes.Buffer
	if err := WriteTar(r, []string{"/home/user/escape", "/home/user/up/secret", "/home/user/notes", "/etc/gone"}, 0, &buf); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("host secret")) {
		t.Error("the archive holds the host file's content")
	}
	tr := tar.NewReader(&buf)
	var names []string
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, hdr.Name+" "+string(hdr.Typeflag))
	}
	if want := []string{"home/user/escape 2", "home/user/notes 0"}; !slices.Equal(names, want) {
		t.Errorf("the archive holds %q, want %q", names, want)
	}
}

func TestUnified(t *testing.T) {
	got := Unified("/a.txt", []byte("one\ntwo\n"), []byte("one\nthree\n"))
	for _, want := range []string{"--- a/a.txt", "+++ b/a.txt", "-two", "+three"} {
		if !strings.Contains(got, want) {
			t.Errorf("unified diff lacks %q:\n%s", want, got)
		}
	}
	if got := Unified("/x", []byte("same"), []byte("same")); got != "" {
		t.Errorf("the same file: %q", got)
	}
	if got := Unified("/bin", []byte{0, 1}, []byte{0, 2}); !strings.Contains(got, "Binary files") {
		t.Errorf("binary: %q", got)
	}
}
