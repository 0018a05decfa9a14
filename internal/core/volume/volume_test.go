package volume

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

func openDB(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A volume is made empty and the sandbox user's, listed with the
// sandboxes that mount it, kept while one does, and removed with its
// files.
func TestVolumes(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a volume's root is given to the sandbox user: needs root")
	}
	db := openDB(t)
	dir := t.TempDir()
	s := New(db, nil, dir, nil)
	ctx := t.Context()

	made, err := s.Create(ctx, "data")
	if err != nil || made.Name != "data" || made.CreatedAt.IsZero() {
		t.Fatalf("Create: %+v, %v", made, err)
	}
	fi, err := os.Stat(Path(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || st.Uid != rootfs.UserUID || st.Gid != rootfs.UserGID {
		t.Errorf("the volume's root: %v, owned by %d:%d, want a directory of the sandbox user", fi.Mode(), st.Uid, st.Gid)
	}
	if _, err := s.Create(ctx, "data"); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Create of a name taken: %v, want already exists", err)
	}

	now := time.Now().UTC()
	for _, id := range []string{"sb1", "sb2"} {
		rec := &store.Sandbox{ID: id, Template: rootfs.HostName, Backend: "fake", State: store.Running, CreatedAt: now, UpdatedAt: now,
			Volumes: []store.VolumeMount{{Name: "data", Path: "/mnt/data", Access: "rw"}}}
		if err := db.CreateSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "data" || !slices.Equal(list[0].Sandboxes, []string{"sb1", "sb2"}) {
		t.Fatalf("List: %+v, %v; want data mounted by sb1 and sb2", list, err)
	}
	if err := s.Delete(ctx, "data"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Delete of a mounted volume: %v, want a conflict", err)
	}
	for _, id := range []string{"sb1", "sb2"} {
		if err := db.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "data"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the volume's files after Delete: %v, want gone", err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List after Delete: %+v, %v", list, err)
	}
	if err := s.Delete(ctx, "data"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Delete of a volume gone: %v, want not found", err)
	}
}

// Bad names, and a daemon without a volume directory, make nothing.
func TestCreateRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		dir  bool
		vol  string
		kind error
	}{
		{"bad name", true, "Not/A name", errdefs.ErrInvalidArgument},
		{"the host template's name", true, rootfs.HostName, errdefs.ErrInvalidArgument},
		{"no volume directory", false, "data", errdefs.ErrFailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t)
			dir := ""
			if tt.dir {
				dir = t.TempDir()
			}
			if _, err := New(db, nil, dir, nil).Create(t.Context(), tt.vol); !errors.Is(err, tt.kind) {
				t.Errorf("Create(%q): %v, want %v", tt.vol, err, tt.kind)
			}
			if vols, err := db.ListVolumes(t.Context()); err != nil || len(vols) != 0 {
				t.Errorf("volumes after a refused create: %+v, %v", vols, err)
			}
		})
	}
}
