package oci

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A volume's mount point is found beneath the sandbox's root without
// following a link: a template whose /mnt links elsewhere (out of the
// root, or to its /etc) gets no mount point there, and nothing is made
// where the link leads.
func TestAttackMountPointLinks(t *testing.T) {
	dir := t.TempDir()
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "etc"), filepath.Join(root, "home", "user"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "mnt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../etc", filepath.Join(root, "home", "user", "data")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, p := range []string{"/mnt/vol", "/home/user/data/vol", "/home/user/../../../outside/vol"} {
		if d, err := mkdirBeneath(fd, p, os.Getuid()); err == nil {
			unix.Close(d)
			t.Errorf("a mount point at %s through a link was made", p)
		}
	}
	for _, p := range []string{filepath.Join(outside, "vol"), filepath.Join(root, "etc", "vol")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was made through a link", p)
		}
	}
	// Beneath the root, missing directories are made.
	d, err := mkdirBeneath(fd, "/home/user/work/data", os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(d)
	if fi, err := os.Stat(filepath.Join(root, "home", "user", "work", "data")); err != nil || !fi.IsDir() {
		t.Errorf("the mount point was not made: %v", err)
	}
}
