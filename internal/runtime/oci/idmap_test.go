package oci

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A read-only bind whose filesystem cannot be idmapped (an overlayfs, as a
// pod's root is) is attached as it is, still read-only; a writable one is
// an error.
func TestAttachIDMappedFallsBackWhereIDMapsAreRefused(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	lower, upper, work, merged := filepath.Join(dir, "l"), filepath.Join(dir, "u"), filepath.Join(dir, "w"), filepath.Join(dir, "m")
	for _, d := range []string{lower, upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		t.Skipf("no overlayfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(merged, unix.MNT_DETACH) })
	userns, err := NewUserns(idBase)
	if err != nil {
		t.Fatal(err)
	}
	defer userns.Close()

	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := attachIDMapped(merged, unix.AT_RECURSIVE, ro, userns, true); err != nil {
		t.Fatalf("a read-only overlayfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ro, unix.MNT_DETACH) })
	if _, err := os.Stat(filepath.Join(ro, "tool")); err != nil {
		t.Errorf("its file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ro, "new"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("a write through it: %v, want EROFS", err)
	}

	rw := filepath.Join(dir, "rw")
	if err := os.Mkdir(rw, 0o755); err != nil {
		t.Fatal(err)
	}
	err = attachIDMapped(merged, unix.AT_RECURSIVE, rw, userns, false)
	if err == nil {
		_ = unix.Unmount(rw, unix.MNT_DETACH)
		t.Log("this kernel idmaps overlayfs: nothing to fall back from")
		return
	}
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("a writable overlayfs: %v, want EINVAL", err)
	}
}
