package rootfs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeHost makes a host root with a merged /usr, a few /etc entries the
// sandbox may see and some it must not.
func fakeHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/lib", "etc/ssl/certs", "etc/alternatives"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, link := range [][2]string{{"bin", "usr/bin"}, {"lib", "usr/lib"}, {"etc/os-release", "../usr/lib/os-release"}} {
		if err := os.Symlink(link[1], filepath.Join(root, link[0])); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"etc/ld.so.cache", "etc/ssl/certs/ca.pem", "etc/passwd", "etc/shadow", "etc/npmrc", "etc/hostname"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// What only the host's root may read is never copied.
	if err := os.Mkdir(filepath.Join(root, "etc/ssl/private"), 0o710); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"etc/ssl/private/host.key", "etc/ssl/unreadable.pem"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestHostTemplate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making the skeleton chowns the user's home: needs root")
	}
	host := fakeHost(t)
	dir := t.TempDir()
	tmpl, _, err := ensureHost(dir, host)
	if err != nil {
		t.Fatal(err)
	}

	binds := map[string]bool{}
	for _, b := range tmpl.Binds {
		if b.Writable {
			t.Errorf("bind %s is writable", b.Destination)
		}
		binds[b.Destination] = true
	}
	if !binds["/usr"] || len(binds) != 1 {
		t.Errorf("binds %v; want the host's /usr alone (the /etc it shows is copied)", binds)
	}

	root := tmpl.RootDir
	// The part of /etc a sandbox sees is a copy of the host's.
	for _, f := range []string{"etc/ld.so.cache", "etc/ssl/certs/ca.pem"} {
		if b, err := os.ReadFile(filepath.Join(root, f)); err != nil || string(b) != "host" {
			t.Errorf("%s in the skeleton: %q, %v; want the host's copy", f, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/alternatives")); err != nil || !fi.IsDir() {
		t.Errorf("etc/alternatives in the skeleton: %v; want the host's directory", err)
	}
	for _, f := range []string{"etc/shadow", "etc/npmrc", "etc/ssl/private", "etc/ssl/unreadable.pem"} {
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s is in the skeleton; the host's is not for sandboxes", f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/hostname")); err != nil || len(b) != 0 {
		t.Errorf("etc/hostname in the skeleton: %q, %v; want the empty file each sandbox writes its own into", b, err)
	}
	if target, err := os.Readlink(filepath.Join(root, "bin")); err != nil || target != "usr/bin" {
		t.Errorf("bin is %q, %v; want the host's symlink to usr/bin", target, err)
	}
	if target, _ := os.Readlink(filepath.Join(root, "etc/os-release")); target != "../usr/lib/os-release" {
		t.Errorf("etc/os-release is %q, want the host's symlink", target)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || strings.Contains(string(b), "host") ||
		!strings.Contains(string(b), "user:x:1000:1000:user:/home/user:/bin/bash\n") {
		t.Errorf("the skeleton's passwd holds %q (%v); want the sandbox's accounts, not the host's", b, err)
	}
	fi, err := os.Stat(filepath.Join(root, "home/user/workspace"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != UserUID || st.Gid != UserGID {
		t.Errorf("workspace belongs to %d:%d, want the sandbox user %d:%d", st.Uid, st.Gid, UserUID, UserGID)
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp is %v (%v), want 1777", fi.Mode(), err)
	}

	// The same host gives the same root; nothing is rebuilt.
	again, _, err := ensureHost(dir, host)
	if err != nil || again.RootDir != tmpl.RootDir {
		t.Fatalf("second ensure = %q, %v; want %q", again.RootDir, err, tmpl.RootDir)
	}
	// A changed host gives a new root beside the old one, which stays for the
	// sandboxes that use it.
	if err := os.WriteFile(filepath.Join(host, "etc/services"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	changed, _, err := ensureHost(dir, host)
	if err != nil || changed.RootDir == tmpl.RootDir {
		t.Fatalf("after a host change: %q, %v; want a new root", changed.RootDir, err)
	}
	if _, err := os.Stat(tmpl.RootDir); err != nil {
		t.Fatalf("the old root went away: %v", err)
	}
	// So does a change of a copied file's content.
	if err := os.WriteFile(filepath.Join(host, "etc/ssl/certs/ca.pem"), []byte("renewed"), 0o644); err != nil {
		t.Fatal(err)
	}
	renewed, _, err := ensureHost(dir, host)
	if err != nil || renewed.RootDir == changed.RootDir {
		t.Fatalf("after a certificate changed: %q, %v; want a new root", renewed.RootDir, err)
	}
	if b, err := os.ReadFile(filepath.Join(renewed.RootDir, "etc/ssl/certs/ca.pem")); err != nil || string(b) != "renewed" {
		t.Errorf("the new root's certificate: %q, %v", b, err)
	}
}

// A snapshot made on a skeleton that had /etc's entries as mount points
// (before skeletonVersion 5) still gets them bound; one made since gets
// the host template's binds.
func TestOldHostSnapshotBinds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making the skeleton chowns the user's home: needs root")
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bound := func(info Info) map[string]bool {
		m := map[string]bool{}
		for _, b := range s.template(info).Binds {
			m[b.Destination] = true
		}
		return m
	}
	old := bound(Info{Name: "old", Version: "v", Source: SourceSnapshot, Parent: HostName + "@" + s.host.Version})
	if !old["/usr"] || !old["/etc/ssl"] || !old["/etc/ld.so.cache"] {
		t.Errorf("an old snapshot's binds: %v; want /usr and /etc's entries", old)
	}
	current := bound(Info{Name: "new", Version: "v", Source: SourceSnapshot, Parent: HostName + "@" + s.host.Version, Skeleton: skeletonVersion})
	if !current["/usr"] || current["/etc/ssl"] {
		t.Errorf("a snapshot's binds: %v; want the host template's, without /etc", current)
	}
}
