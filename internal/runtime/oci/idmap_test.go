package oci

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

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

// NewUserns holds while the daemon's threads come and go: a goroutine that
// locks its thread and ends without unlocking it (a start in its own mount
// namespace, a network namespace made) ends that thread, which may be the
// one that forked unshare. Each namespace maps the range asked for.
func TestNewUsernsWhileThreadsEnd(t *testing.T) {
	requireRoot(t)
	stop := make(chan struct{})
	var churn sync.WaitGroup
	for range 2 {
		churn.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := make(chan struct{})
				go func() {
					runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
					close(done)
				}()
				<-done
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	defer func() { close(stop); churn.Wait() }()
	for i := range 30 {
		began := time.Now()
		ns, err := NewUserns(idBase + uint32(i)*idRange)
		if err != nil {
			t.Fatalf("namespace %d, after %s: %v", i, time.Since(began), err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		ns.Close()
	}
}
