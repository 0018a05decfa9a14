package volume

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// A create's volumes are checked and given their defaults; those with
// access none go; each is bound at its path, read-only or writable.
func TestMounts(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	for _, name := range []string{"data", "cache", "models~acme"} {
		if err := db.CreateVolume(t.Context(), &store.Volume{Name: name, CreatedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	m := &Mounts{Store: db, Dir: "/var/lib/hutch/volumes"}
	c := create.Options{Volumes: []store.VolumeMount{
		{Name: "data"},
		{Name: "cache", Path: "/home/user/.cache", Access: AccessRO},
		{Name: "models~acme", Access: AccessNone},
	}}
	if err := m.Prepare(t.Context(), &c); err != nil {
		t.Fatal(err)
	}
	want := []store.VolumeMount{{Name: "data", Path: "/mnt/data", Access: AccessRW}, {Name: "cache", Path: "/home/user/.cache", Access: AccessRO}}
	if !reflect.DeepEqual(c.Volumes, want) {
		t.Fatalf("prepared %+v, want %+v", c.Volumes, want)
	}
	binds := []backend.Bind{
		{Source: "/var/lib/hutch/volumes/data/data", Destination: "/mnt/data", Writable: true},
		{Source: "/var/lib/hutch/volumes/cache/data", Destination: "/home/user/.cache"},
	}
	if got := m.Binds(&c); !reflect.DeepEqual(got, binds) {
		t.Errorf("binds %+v, want %+v", got, binds)
	}
	if got := m.Binds(&create.Options{}); len(got) != 0 {
		t.Errorf("binds of a sandbox without volumes: %+v", got)
	}

	for _, tc := range []struct {
		name string
		vols []store.VolumeMount
		kind error
	}{
		{"unknown", []store.VolumeMount{{Name: "nope"}}, errdefs.ErrNotFound},
		{"bad access", []store.VolumeMount{{Name: "data", Access: "rwx"}}, errdefs.ErrInvalidArgument},
		{"over the system", []store.VolumeMount{{Name: "data", Path: "/etc"}}, errdefs.ErrInvalidArgument},
		{"not clean", []store.VolumeMount{{Name: "data", Path: "/mnt/../etc"}}, errdefs.ErrInvalidArgument},
		{"relative", []store.VolumeMount{{Name: "data", Path: "mnt/data"}}, errdefs.ErrInvalidArgument},
		{"two at one path", []store.VolumeMount{{Name: "data"}, {Name: "cache", Path: "/mnt/data"}}, errdefs.ErrInvalidArgument},
	} {
		c := create.Options{Volumes: tc.vols}
		if err := m.Prepare(t.Context(), &c); !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.kind)
		}
	}
}
