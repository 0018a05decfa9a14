package template

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
	for _, f := range []string{"etc/ld.so.cache", "etc/passwd", "etc/shadow", "etc/npmrc", "etc/hostname"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("host"), 0o644); err != nil {
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
	tmpl, err := ensureHost(dir, host)
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
	for _, want := range []string{"/usr", "/etc/ssl", "/etc/alternatives", "/etc/ld.so.cache"} {
		if !binds[want] {
			t.Errorf("%s is not bound from the host", want)
		}
	}
	for _, secret := range []string{"/etc/passwd", "/etc/shadow", "/etc/npmrc", "/etc/hostname", "/bin", "/lib"} {
		if binds[secret] {
			t.Errorf("%s is bound from the host", secret)
		}
	}

	root := tmpl.RootDir
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
	again, err := ensureHost(dir, host)
	if err != nil || again.RootDir != tmpl.RootDir {
		t.Fatalf("second ensure = %q, %v; want %q", again.RootDir, err, tmpl.RootDir)
	}
	// A changed host gives a new root beside the old one, which stays for the
	// sandboxes that use it.
	if err := os.WriteFile(filepath.Join(host, "etc/services"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := ensureHost(dir, host)
	if err != nil || changed.RootDir == tmpl.RootDir {
		t.Fatalf("after a host change: %q, %v; want a new root", changed.RootDir, err)
	}
	if _, err := os.Stat(tmpl.RootDir); err != nil {
		t.Fatalf("the old root went away: %v", err)
	}
}
