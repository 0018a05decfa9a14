package rootfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDesktopLayout lays out a root with Xfce, D-Bus and noVNC as the
// desktop template's build does: noVNC where E2B's template has it, the
// session bus on an abstract address, and /tmp/.ICE-unix a read-only
// file, a link planted there removed, not followed.
func TestDesktopLayout(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{
		"usr/bin/xfce4-session":             "",
		"usr/share/dbus-1/session.conf":     "<busconfig>\n  <listen>unix:tmpdir=/tmp</listen>\n</busconfig>\n",
		"usr/share/novnc/utils/novnc_proxy": "#!/bin/bash\n",
		"usr/share/novnc/vnc.html":          "<html>",
		"var/lib/dpkg/status":               "Package: novnc-extra\nVersion: 9\n\nPackage: novnc\nStatus: install ok installed\nVersion: 1:1.3.0-1\nDescription: x\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "tmp/.ICE-unix")); err != nil {
		t.Fatal(err)
	}
	if err := layOutNoVNC(root); err != nil {
		t.Fatal(err)
	}
	if err := letDesktopSuspend(root); err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]string{"opt/noVNC": "/usr/share/novnc", "usr/local/bin/novnc_proxy": "/usr/share/novnc/utils/novnc_proxy"} {
		if got, err := os.Readlink(filepath.Join(root, link)); err != nil || got != want {
			t.Errorf("/%s links to %q (%v), want %q", link, got, err, want)
		}
	}
	if pkg, err := os.ReadFile(filepath.Join(root, "usr/share/novnc/package.json")); err != nil || string(pkg) != `{"name":"novnc","version":"1.3.0"}`+"\n" {
		t.Errorf("noVNC's package.json: %q %v", pkg, err)
	}
	conf, err := os.ReadFile(filepath.Join(root, "usr/share/dbus-1/session.conf"))
	if err != nil || !strings.Contains(string(conf), "<listen>unix:abstract=/tmp/dbus-session</listen>") || strings.Contains(string(conf), "tmpdir") {
		t.Errorf("session.conf: %q %v", conf, err)
	}
	fi, err := os.Lstat(filepath.Join(root, "tmp/.ICE-unix"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o444 {
		t.Errorf("/tmp/.ICE-unix: %v %v, want a read-only file", fi.Mode(), err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the directory the planted link pointed at: %v", err)
	}

	// A root without Xfce or noVNC is left as it was.
	plain := t.TempDir()
	if err := layOutNoVNC(plain); err != nil {
		t.Fatal(err)
	}
	if err := letDesktopSuspend(plain); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(plain); len(entries) != 0 {
		t.Errorf("a plain root gained %v", entries)
	}
}
