package oci

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/mountinfo"
)

// A runtime started from a start namespace sees its sandbox's mounts and
// not another's, and the host's table is as it was afterwards.
func TestStartNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mount namespaces need root")
	}
	dir := t.TempDir()
	own, other := filepath.Join(dir, "own"), filepath.Join(dir, "other")
	ownRoot := filepath.Join(own, "rootfs")
	lower, upper, work := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{ownRoot, other, lower, upper, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The other sandbox's root, an overlay as Hutch's are; this one's
	// a tmpfs, which a start namespace would keep had it been there.
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", other, "overlay", 0, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mountinfo.UnmountUnder(dir) })
	var s startNS
	t.Cleanup(func() {
		if s.file != nil {
			_ = s.file.Close()
		}
	})
	if err := unix.Mount("hutch-own", ownRoot, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	// The host's mounts under dir, which the start namespace leaves out
	// (other) or clones (own): the same after the start.
	before, err := mountinfo.Under(dir)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("cat", "/proc/self/mountinfo")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := s.start(cmd, own, []string{dir}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	seen := out.String()
	if !strings.Contains(seen, " "+ownRoot+" ") {
		t.Errorf("the sandbox's own root is not in its start namespace:\n%s", seen)
	}
	if strings.Contains(seen, " "+other+" ") {
		t.Errorf("another sandbox's root is in this one's start namespace:\n%s", seen)
	}

	after, err := mountinfo.Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) {
		t.Errorf("the host had %q mounted under the test's dir before the start and %q after", before, after)
	}
}

// What holds the root or the runtime's directories stays in a start
// namespace whatever its kind: a host on an overlay keeps its root.
func TestStartNamespaceKeeps(t *testing.T) {
	keep := []string{"/var/lib/hutch/sandboxes", "/run/hutch/runc"}
	for point, want := range map[string]bool{
		"/":                                 true,
		"/var":                              true,
		"/var/lib/hutch/sandboxes":          true,
		"/var/lib/hutch/sandboxes/a/rootfs": false,
		"/var/lib/hutch/disks/d1":           false,
		"/run/hutch/netns/runc/a.router":    false,
		"/run/hutc":                         false,
	} {
		if got := holds(point, keep); got != want {
			t.Errorf("holds(%s) = %v, want %v", point, got, want)
		}
	}
}
