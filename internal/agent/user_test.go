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
