package apikeys

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/store/sqlite"
	"github.com/hutchdev/hutch/internal/tools"
)

// A key is shown once and found by itself afterwards; only its name, mode
// and time are listed; a removed key is found no more.
func TestKeys(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s := New(db, nil)
	ctx := t.Context()

	key, made, err := s.Create(ctx, "app", "", "")
	if err != nil || !strings.HasPrefix(key, "hutch_") || made.Name != "app" || made.ToolsMode != tools.ModeAll || made.NetworkMode != "full" {
		t.Fatalf("Create: %q %+v %v", key, made, err)
	}
	if got, err := s.Lookup(ctx, key); err != nil || got.Name != "app" || got.NetworkMode != "full" {
		t.Errorf("Lookup of the key: %+v, %v", got, err)
	}
	if _, err := s.Lookup(ctx, key+"x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup of another key: %v, want not found", err)
	}
	for _, bad := range []struct{ name, mode, network string }{{"Bad Name", "", ""}, {"ok", "sometimes", ""}, {"ok", "", "some"}} {
		if _, _, err := s.Create(ctx, bad.name, bad.mode, bad.network); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Create(%q, %q, %q): %v, want invalid argument", bad.name, bad.mode, bad.network, err)
		}
	}
	if _, made, err := s.Create(ctx, "quiet", "", "none"); err != nil || made.NetworkMode != "none" {
		t.Errorf("Create with network mode none: %+v, %v", made, err)
	}
	if _, _, err := s.Create(ctx, "app", tools.ModeOff, ""); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Create of a taken name: %v, want already exists", err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 2 || list[0].Name != "app" || list[1].NetworkMode != "none" {
		t.Errorf("List: %+v, %v", list, err)
	}
	if err := s.Delete(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, key); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup of a removed key: %v, want not found", err)
	}
}
