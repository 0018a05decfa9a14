package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// The account files are read again when they change, by a rename (as
// useradd does) or in place, and not otherwise.
func TestAccountFilesFollowChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	write := func(text string) {
		t.Helper()
		tmp := passwd + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, passwd); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{cfg: Config{PasswdFile: passwd, DefaultUser: "user"}}
	write("user:x:1000:1000::/home/user:/bin/bash\n")
	if a, err := s.lookupUser(""); err != nil || a.UID != 1000 || a.Home != "/home/user" {
		t.Fatalf("user: %+v, %v", a, err)
	}
	if _, err := s.lookupUser("dev"); err == nil {
		t.Fatal("dev found before it was added")
	}
	write("user:x:1000:1000::/home/user:/bin/bash\ndev:x:1001:1001::/home/dev:/bin/sh\n")
	if a, err := s.lookupUser("dev"); err != nil || a.UID != 1001 {
		t.Fatalf("dev after useradd's rename: %+v, %v", a, err)
	}
	// In place, another size.
	if err := os.WriteFile(passwd, []byte("user:x:1000:1000::/srv/user:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := s.lookupUser(""); err != nil || a.Home != "/srv/user" {
		t.Fatalf("user after an edit in place: %+v, %v", a, err)
	}
	if _, err := s.lookupUser("dev"); err == nil {
		t.Fatal("dev still found after it was removed")
	}
	if err := os.Remove(passwd); err != nil {
		t.Fatal(err)
	}
	if _, err := s.lookupUser(""); err == nil {
		t.Fatal("a user found with no passwd file")
	}
}

// A watched file is served from the cache until inotify tells of a change
// in its directory or to it; a directory renamed away and made again, or a
// file that is a symlink (whose target may change unseen), is checked by
// its stat.
func TestAccountFilesWatch(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "etc")
	passwd := filepath.Join(dir, "passwd")
	mustWrite := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var a accountFiles
	read := func(want string, watched bool) {
		t.Helper()
		data, err := a.read(passwd)
		if err != nil || string(data) != want {
			t.Fatalf("read %q, %v; want %q", data, err, want)
		}
		if f := a.files[passwd]; f.watched != watched {
			t.Fatalf("watched %v, want %v", f.watched, watched)
		}
	}
	mustWrite(passwd, "a\n")
	read("a\n", true)
	read("a\n", true)
	mustWrite(passwd, "b\n") // in place
	read("b\n", true)
	mustWrite(filepath.Join(dir, "group"), "g\n") // a neighbour: checked by stat, unchanged
	read("b\n", true)
	// The directory renamed away and made again.
	if err := os.Rename(dir, filepath.Join(base, "old")); err != nil {
		t.Fatal(err)
	}
	mustWrite(passwd, "c\n")
	read("c\n", true)
	// A symlink: checked by its stat each time.
	target := filepath.Join(base, "real")
	mustWrite(target, "d\n")
	if err := os.Remove(passwd); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, passwd); err != nil {
		t.Fatal(err)
	}
	read("d\n", false)
	mustWrite(target, "e!\n")
	read("e!\n", false)
	if a.watch != nil {
		a.watch.close()
	}
}
