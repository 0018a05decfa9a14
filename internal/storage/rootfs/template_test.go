package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// openStore opens a store in a new directory. Making the host template
// chowns the user's home, so it needs root.
func openStore(t *testing.T) *Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the store makes the host template, which chowns: needs root")
	}
	s, err := Open(filepath.Join(t.TempDir(), "templates"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// assertNoBuilds fails if a build directory is left in the store.
func assertNoBuilds(t *testing.T, s *Store) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(s.dir, ".build-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("builds left in the store: %v %v", left, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.building) > 0 {
		t.Errorf("builds still marked under way: %v", s.building)
	}
}

func assertOwner(t *testing.T, path string, uid uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
		t.Errorf("%s belongs to uid %d, want %d", path, st.Uid, uid)
	}
}

// build commits a template whose root holds one file saying which build
// it is.
func build(t *testing.T, s *Store, name, content string) Info {
	t.Helper()
	b, err := s.Begin(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Abort() }()
	if err := os.MkdirAll(b.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Root(), "which"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := b.Commit(Info{Source: SourceDebian, Packages: []string{"jq"}})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func readWhich(t *testing.T, s *Store, name string) string {
	t.Helper()
	tmpl, err := s.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tmpl.RootDir, "which"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStoreLifecycle(t *testing.T) {
	s := openStore(t)
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Name != HostName || list[0].Source != SourceHost {
		t.Fatalf("a new store lists %+v, %v; want the host template alone", list, err)
	}

	first := build(t, s, "py", "first")
	if first.Name != "py" || first.Version == "" || first.Created.IsZero() || first.SizeBytes <= 0 {
		t.Errorf("committed info = %+v", first)
	}
	if got := readWhich(t, s, "py"); got != "first" {
		t.Errorf("py's root holds %q", got)
	}

	// A second build replaces it; a sandbox of the first keeps its root
	// until Prune finds it unused.
	old, _ := s.Get("py")
	second := build(t, s, "py", "second")
	if second.Version == first.Version {
		t.Fatalf("two builds share version %s", first.Version)
	}
	if got := readWhich(t, s, "py"); got != "second" {
		t.Errorf("after a rebuild py's root holds %q", got)
	}
	if _, err := os.Stat(old.RootDir); err != nil {
		t.Fatalf("the old version went before Prune: %v", err)
	}
	inUse := map[string]bool{"py/" + first.Version: true}
	used := func(name, version string) bool { return inUse[name+"/"+version] }
	if err := s.Prune(used); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old.RootDir); err != nil {
		t.Fatalf("Prune removed a version in use: %v", err)
	}
	delete(inUse, "py/"+first.Version)
	if err := s.Prune(used); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old.RootDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Prune kept an unused old version: %v", err)
	}
	if got := readWhich(t, s, "py"); got != "second" {
		t.Errorf("Prune touched the current version: %q", got)
	}

	build(t, s, "node", "n")
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range list {
		names = append(names, i.Name)
	}
	if len(names) != 3 || names[0] != "host" || names[1] != "node" || names[2] != "py" {
		t.Errorf("List names = %v, want host, node, py", names)
	}
	if info, err := s.Info("py"); err != nil || info.Version != second.Version || info.Packages[0] != "jq" {
		t.Errorf("Info(py) = %+v, %v", info, err)
	}

	if err := s.Remove("py"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("py"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Remove: %v, want not found", err)
	}
	if err := s.Remove("py"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Remove: %v, want not found", err)
	}
	if err := s.Remove(HostName); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Remove(host): %v, want refused", err)
	}
	assertNoBuilds(t, s)
}

func TestStoreNames(t *testing.T) {
	s := openStore(t)
	for _, bad := range []string{"", "Py", "-x", ".hidden", "a/b", "..", "host", string(make([]byte, 64))} {
		if _, err := s.Begin(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Begin(%q) = %v, want invalid", bad, err)
		}
		if _, err := s.Get(bad); bad != HostName && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want not found", bad, err)
		}
	}
	for _, good := range []string{"py", "python3.12", "my_tmpl-2"} {
		b, err := s.Begin(good)
		if err != nil {
			t.Errorf("Begin(%q) = %v", good, err)
			continue
		}
		if err := b.Abort(); err != nil {
			t.Error(err)
		}
	}
	assertNoBuilds(t, s)
}

// TestBuildsExclude: one build of a name at a time, and no removal while
// it runs.
func TestBuildsExclude(t *testing.T) {
	s := openStore(t)
	build(t, s, "py", "first")
	b, err := s.Begin("py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin("py"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("second Begin = %v, want a conflict", err)
	}
	if err := s.Remove("py"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Remove during a build = %v, want a conflict", err)
	}
	if err := b.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := readWhich(t, s, "py"); got != "first" {
		t.Errorf("an aborted build changed py: %q", got)
	}
	assertNoBuilds(t, s)
}

// TestOpenRemovesInterruptedBuilds: what a crash left mid-build (a mount
// included) is gone when the store opens again.
func TestOpenRemovesInterruptedBuilds(t *testing.T) {
	s := openStore(t)
	b, err := s.Begin("cut")
	if err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(b.Root(), "proc")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", proc, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	// The daemon dies here: no Commit, no Abort.
	again, err := Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	assertNoBuilds(t, again)
	if _, err := again.Get("cut"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(cut) = %v, want not found", err)
	}
}
