package rootfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A template version copied to another node's store is the same there:
// same version and info, same files with their owners, modes, links and
// hard links, its memory image too; a stream that does not match its
// sender's digest leaves nothing.
func TestArchiveRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of other owners")
	}
	src := openStore(t)
	b, err := src.Begin("copied")
	if err != nil {
		t.Fatal(err)
	}
	root := b.Root()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("#!/bin/sh\necho tool\n"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr/bin/tool"), os.ModeSetuid|0o755))
	must(os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool-again")))
	must(os.Symlink("tool", filepath.Join(root, "usr/bin/alias")))
	must(os.MkdirAll(filepath.Join(root, "home/user"), 0o700))
	must(os.WriteFile(filepath.Join(root, "home/user/notes"), []byte("mine"), 0o600))
	must(os.Lchown(filepath.Join(root, "home/user"), 1000, 1000))
	must(os.Lchown(filepath.Join(root, "home/user/notes"), 1000, 1000))
	must(os.MkdirAll(b.memory(), 0o700))
	must(os.WriteFile(filepath.Join(b.memory(), "checkpoint.img"), bytes.Repeat([]byte{7}, 1<<20), 0o600))
	info, err := b.Commit(Info{Source: SourceSnapshot, Parent: "base@1", MemoryRuntime: "gvisor", Env: map[string]string{"A": "b"}})
	if err != nil {
		t.Fatal(err)
	}

	var archive bytes.Buffer
	sum, err := src.WriteArchive(t.Context(), &archive, "copied", info.Version)
	if err != nil {
		t.Fatal(err)
	}
	dst := openStore(t)
	got, err := dst.Receive(t.Context(), info, bytes.NewReader(archive.Bytes()), func() string { return sum })
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != info.Version || !got.Created.Equal(info.Created) || got.MemoryRuntime != "gvisor" || got.Env["A"] != "b" || got.SizeBytes != info.SizeBytes {
		t.Errorf("received %+v, sent %+v", got, info)
	}
	if cur, err := dst.Info("copied"); err != nil || cur.Version != info.Version {
		t.Errorf("its current version there: %+v, %v", cur, err)
	}
	tmpl, err := dst.Get("copied")
	if err != nil || tmpl.Memory == "" {
		t.Fatalf("the copy: %+v, %v", tmpl, err)
	}
	stat := func(p string) *syscall.Stat_t {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(tmpl.RootDir, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t)
	}
	if st := stat("usr/bin/tool"); st.Mode&0o7777 != 0o4755 || st.Nlink != 2 {
		t.Errorf("tool: mode %o, %d links", st.Mode&0o7777, st.Nlink)
	}
	if stat("usr/bin/tool").Ino != stat("usr/bin/tool-again").Ino {
		t.Error("the hard link is a copy")
	}
	if dest, err := os.Readlink(filepath.Join(tmpl.RootDir, "usr/bin/alias")); err != nil || dest != "tool" {
		t.Errorf("the symbolic link: %q, %v", dest, err)
	}
	if st := stat("home/user/notes"); st.Uid != 1000 || st.Gid != 1000 || st.Mode&0o777 != 0o600 {
		t.Errorf("notes: owner %d:%d, mode %o", st.Uid, st.Gid, st.Mode&0o777)
	}
	if b, err := os.ReadFile(filepath.Join(tmpl.Memory, "checkpoint.img")); err != nil || len(b) != 1<<20 {
		t.Errorf("the memory image: %d bytes, %v", len(b), err)
	}

	// Received again: the version it has.
	if again, err := dst.Receive(t.Context(), info, strings.NewReader(""), func() string { return "" }); err != nil || again.Version != info.Version {
		t.Errorf("the same version again: %+v, %v", again, err)
	}

	// A stream that is not what its sender hashed: nothing is kept.
	other := openStore(t)
	corrupt := bytes.Clone(archive.Bytes())
	corrupt[len(corrupt)/2] ^= 0xff
	if _, err := other.Receive(context.Background(), info, bytes.NewReader(corrupt), func() string { return sum }); err == nil {
		t.Fatal("a corrupt archive was received")
	}
	if _, err := other.Info("copied"); err == nil {
		t.Error("a corrupt archive became a template")
	}
	if left, _ := filepath.Glob(filepath.Join(other.dir, ".build-*")); len(left) > 0 {
		t.Errorf("a failed receive left %v", left)
	}
}
