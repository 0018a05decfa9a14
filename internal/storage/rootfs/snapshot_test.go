package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A snapshot is the parent's root, sharing its files, with what apply
// wrote; one of the host template gets the host's binds; a name another
// kind of template has is a conflict, and a failed apply leaves nothing.
func TestSnapshot(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	build(t, s, "py", "first")
	parent, err := s.Get("py")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Snapshot(ctx, "snap", parent, "sb1", "runc", func(root, _ string) (bool, error) {
		return false, os.WriteFile(filepath.Join(root, "new.txt"), []byte("added"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Source != SourceSnapshot || info.Parent != "py@"+parent.Version || info.Sandbox != "sb1" {
		t.Errorf("snapshot info: %+v", info)
	}
	snap, err := s.Get("snap")
	if err != nil {
		t.Fatal(err)
	}
	if got := readWhich(t, s, "snap"); got != "first" {
		t.Errorf("the snapshot's root lacks the parent's files: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(snap.RootDir, "new.txt")); err != nil || string(b) != "added" {
		t.Errorf("the snapshot's own file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(parent.RootDir, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot wrote into its parent: %v", err)
	}
	if len(snap.Binds) != 0 || snap.Memory != "" || info.MemoryRuntime != "" {
		t.Errorf("a snapshot of py has binds %v or memory %q (%q)", snap.Binds, snap.Memory, info.MemoryRuntime)
	}
	// A snapshot with memory keeps its image beside the root, counted in
	// its size, and names the runtime that can restore it.
	withMem, err := s.Snapshot(ctx, "mem", parent, "sb1", "gvisor", func(_, memory string) (bool, error) {
		if err := os.Mkdir(memory, 0o700); err != nil {
			return false, err
		}
		return true, os.WriteFile(filepath.Join(memory, "pages.img"), make([]byte, 1<<20), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := s.Get("mem")
	if err != nil || withMem.MemoryRuntime != "gvisor" || mem.MemoryRuntime != "gvisor" || withMem.SizeBytes < info.SizeBytes+1<<20 {
		t.Errorf("a snapshot with memory: %+v, %+v, %v", withMem, mem, err)
	}
	if _, err := os.Stat(filepath.Join(mem.Memory, "pages.img")); err != nil {
		t.Errorf("its memory image: %v", err)
	}

	host, _ := s.Get(HostName)
	if _, err := s.Snapshot(ctx, "onhost", host, "sb2", "runc", func(string, string) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get("onhost"); len(got.Binds) == 0 || len(got.Binds) != len(host.Binds) {
		t.Errorf("a snapshot of the host template has binds %v, want the host's %v", got.Binds, host.Binds)
	}

	if _, err := s.Snapshot(ctx, "py", parent, "sb1", "runc", func(string, string) (bool, error) { return false, nil }); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a snapshot named like a built template: %v, want conflict", err)
	}
	if _, err := s.Snapshot(ctx, "broken", parent, "sb1", "runc", func(string, string) (bool, error) { return false, errors.New("copy failed") }); err == nil {
		t.Error("a failed apply made a snapshot")
	}
	if _, err := s.Info("broken"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed snapshot is listed: %v", err)
	}
	assertNoBuilds(t, s)
}
