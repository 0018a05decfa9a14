package create

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Zero values are the defaults; a snapshot is the template it names; the
// files are the writable layer's.
func TestWithDefaults(t *testing.T) {
	t.Parallel()
	o, files, err := Options{Files: map[string]string{"notes.txt": "hi"}}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Template != DefaultTemplate || o.CPUs != DefaultCPUs || o.MemoryMB != DefaultMemoryMB || o.Pids != DefaultPids ||
		o.DiskMB != DefaultDiskMB || o.IdleTimeout != DefaultIdleTimeout || o.IdleAction != store.IdleSuspend ||
		o.MaxLifetime != DefaultMaxLifetime || o.Workspace != workspace.Default {
		t.Errorf("defaults: %+v", o)
	}
	if f, ok := files[rootfs.Workspace+"/notes.txt"]; !ok || string(f.Data) != "hi" || f.UID != rootfs.UserUID {
		t.Errorf("files: %+v", files)
	}
	if o, _, err := (Options{FromSnapshot: "snap-1"}).WithDefaults(); err != nil || o.Template != "snap-1" {
		t.Errorf("from a snapshot: template %q, %v", o.Template, err)
	}
	if _, _, err := (Options{FromSnapshot: "snap-1", Template: "python"}).WithDefaults(); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a snapshot and another template: %v, want invalid argument", err)
	}
}

// Every field out of its bounds is refused, all of them in one error.
func TestWithDefaultsRefuses(t *testing.T) {
	t.Parallel()
	_, _, err := Options{
		CPUs: 1000, MemoryMB: 1, Pids: 1, DiskMB: 1, Key: "a\nb", IdleAction: "explode", Workspace: "Not A Workspace",
		Secrets: []string{"1BAD"}, IdleTimeout: time.Millisecond, MaxLifetime: 400 * 24 * time.Hour,
		Files: map[string]string{"../escape": "x"}, Env: map[string]string{"A=B": "c"},
	}.WithDefaults()
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad options: %v, want invalid argument", err)
	}
	for _, says := range []string{"cpus", "memory_mb", "pids", "disk_mb", "key", "idle_action", "workspace", `secret name "1BAD"`,
		"idle_timeout_s", "max_lifetime_s", "files", `env name "A=B"`} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the error does not name %s: %v", says, err)
		}
	}
}

// A sandbox's spec names it, resolves through the daemon and has the
// options' limits; its ids are valid hostnames, and differ.
func TestSpec(t *testing.T) {
	t.Parallel()
	o, _, err := Options{CPUs: 0.5, MemoryMB: 256}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	id := NewID()
	if len(id) != 12 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789") != "" || NewID() == id {
		t.Fatalf("ids %q", id)
	}
	s := o.Spec(id, "/roots/host", nil)
	if s.ID != id || s.Hostname != id || s.RootDir != "/roots/host" || s.Limits.CPUs != 0.5 || s.Limits.MemoryBytes != 256<<20 ||
		s.Limits.Pids != DefaultPids || s.Limits.DiskBytes != DefaultDiskMB<<20 {
		t.Errorf("spec %+v", s)
	}
	if string(s.Files["/etc/hostname"].Data) != id+"\n" || !strings.HasPrefix(string(s.Files["/etc/resolv.conf"].Data), "nameserver ") {
		t.Errorf("identity files %v", s.Files)
	}
}

// A keepalive gives a timer or two, each within its bounds.
func TestCheckKeepalive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout  time.Duration
		action   string
		lifetime time.Duration
		ok       bool
	}{
		{time.Minute, "", 0, true},
		{0, store.IdleStop, time.Hour, true},
		{0, store.IdleDelete, 0, false},
		{time.Millisecond, "", 0, false},
		{time.Minute, "explode", 0, false},
		{0, "", 400 * 24 * time.Hour, false},
	} {
		err := CheckKeepalive(tc.timeout, tc.action, tc.lifetime)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CheckKeepalive(%v, %q, %v): %v", tc.timeout, tc.action, tc.lifetime, err)
		}
	}
}
