package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/lifecycle"
	"github.com/hutchdev/hutch/internal/netpolicy"
	"github.com/hutchdev/hutch/internal/store"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

func sample(id string) *store.Sandbox {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return &store.Sandbox{
		ID: id, Template: "host", TemplateVersion: "20261122T070000123Z", Backend: "runc", State: lifecycle.Running,
		Handle: []byte(`{"dir":"/x"}`), CPUs: 1.5, MemoryMB: 512, Pids: 256,
		IdleTimeout: 300 * time.Second, Env: map[string]string{"A": "b"},
		Metadata: map[string]string{"owner": "t"}, CreatedAt: now, UpdatedAt: now, IdleAction: store.IdleSuspend,
		ExpiresAt: now.Add(time.Hour), Workspace: "default", User: "u-42", Secrets: []string{"TOKEN"},
	}
}

func TestSandboxRoundTrip(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	sb := sample("abc")
	if err := db.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetSandbox(ctx, "abc")
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUs != 1.5 || got.Env["A"] != "b" || got.Metadata["owner"] != "t" ||
		got.IdleTimeout != 300*time.Second || !got.CreatedAt.Equal(sb.CreatedAt) || string(got.Handle) != `{"dir":"/x"}` ||
		!got.ExpiresAt.Equal(sb.ExpiresAt) {
		t.Fatalf("round trip changed the record: %+v", got)
	}

	// A change of state applies from the state it names, and changes
	// nothing else.
	at := now().Add(time.Second)
	if err := db.ChangeState(ctx, store.StateChange{ID: "abc", From: []lifecycle.State{lifecycle.Paused, lifecycle.Running},
		To: lifecycle.Error, Reason: "container died", At: at}); err != nil {
		t.Fatal(err)
	}
	again, _ := db.GetSandbox(ctx, "abc")
	if again.State != lifecycle.Error || again.StateReason != "container died" || !again.UpdatedAt.Equal(at) ||
		string(again.Handle) != `{"dir":"/x"}` || again.Env["A"] != "b" {
		t.Fatalf("change lost, or more changed: %+v", again)
	}
	err = db.ChangeState(ctx, store.StateChange{ID: "abc", From: []lifecycle.State{lifecycle.Running}, To: lifecycle.Paused, At: at})
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "is error, not running") {
		t.Fatalf("change from a state it is not in: %v", err)
	}
	if err := db.ChangeState(ctx, store.StateChange{ID: "abc", From: []lifecycle.State{lifecycle.Error}, To: lifecycle.Running,
		At: at, Handle: []byte(`{"dir":"/y"}`)}); err != nil {
		t.Fatal(err)
	}
	// Timers, and nothing else.
	if err := db.SetTimers(ctx, "abc", store.Timers{IdleTimeout: time.Minute, IdleAction: store.IdleStop, ExpiresAt: at.Add(time.Hour), At: at}); err != nil {
		t.Fatal(err)
	}
	again, _ = db.GetSandbox(ctx, "abc")
	if string(again.Handle) != `{"dir":"/y"}` || again.State != lifecycle.Running || again.IdleTimeout != time.Minute ||
		again.IdleAction != store.IdleStop || !again.ExpiresAt.Equal(at.Add(time.Hour)) {
		t.Fatalf("after a new handle and timers: %+v", again)
	}
	// A sandbox made without a policy has mode none; a policy set is
	// kept, and nothing else changes.
	if again.Network.Mode != netpolicy.None {
		t.Fatalf("network policy of a sandbox made without: %+v", again.Network)
	}
	policy := netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"pypi.org", "203.0.113.0/24"}, Deny: []string{"evil.pypi.org"}}
	if err := db.SetNetwork(ctx, "abc", policy, at); err != nil {
		t.Fatal(err)
	}
	again, _ = db.GetSandbox(ctx, "abc")
	if !reflect.DeepEqual(again.Network, policy) || again.IdleTimeout != time.Minute || string(again.Handle) != `{"dir":"/y"}` {
		t.Fatalf("after a network policy: %+v", again)
	}
}

// Of changes racing from one state, exactly one applies.
func TestChangeStateRace(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	if err := db.CreateSandbox(ctx, sample("r")); err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			to := lifecycle.Paused
			if i%2 == 1 {
				to = lifecycle.Suspending
			}
			errs <- db.ChangeState(ctx, store.StateChange{ID: "r", From: []lifecycle.State{lifecycle.Running}, To: to, At: now()})
		}()
	}
	applied := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			applied++
		case !errors.Is(err, errdefs.ErrConflict):
			t.Errorf("racing change: %v", err)
		}
	}
	if applied != 1 {
		t.Errorf("%d racing changes applied, want 1", applied)
	}
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func TestSandboxErrors(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	if err := db.CreateSandbox(ctx, sample("a")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate create", db.CreateSandbox(ctx, sample("a")), errdefs.ErrAlreadyExists},
		{"get missing", func() error { _, err := db.GetSandbox(ctx, "nope"); return err }(), errdefs.ErrNotFound},
		{"change state of missing", db.ChangeState(ctx, store.StateChange{ID: "nope", From: []lifecycle.State{lifecycle.Running}, To: lifecycle.Error}), errdefs.ErrNotFound},
		{"set timers of missing", db.SetTimers(ctx, "nope", store.Timers{}), errdefs.ErrNotFound},
		{"set network of missing", db.SetNetwork(ctx, "nope", netpolicy.Policy{Mode: netpolicy.Full}, time.Now()), errdefs.ErrNotFound},
		{"delete missing", db.DeleteSandbox(ctx, "nope"), errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("got %v, want %v", tt.err, tt.want)
			}
		})
	}
}

func TestListAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"b", "a", "c"} {
		sb := sample(id)
		sb.CreatedAt = sb.CreatedAt.Add(time.Duration(i) * time.Second)
		if err := db.CreateSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteSandbox(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening migrates nothing and keeps the data.
	db, err = Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	list, err := db.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "b" || list[1].ID != "c" {
		t.Fatalf("list = %v, want b, c in creation order", list)
	}
}

// The database and its journal files are its owner's alone, also when an
// older version made them readable by all.
func TestDatabaseIsOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := db.CreateSandbox(t.Context(), sample("abc")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
		}
	}
}

// A key finds its sandbox, belongs to one at most in a workspace (another
// workspace's same key is another's), and is free again once that sandbox
// goes; sandboxes without keys are many.
func TestSandboxKeys(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	a, b, c, d := sample("a"), sample("b"), sample("c"), sample("d")
	a.Key, b.Key = "conversation-1", "conversation-1"
	if err := db.CreateSandbox(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSandbox(ctx, b); !errors.Is(err, errdefs.ErrAlreadyExists) || !strings.Contains(err.Error(), "conversation-1") {
		t.Errorf("a second sandbox with key conversation-1: %v, want already exists", err)
	}
	for _, sb := range []*store.Sandbox{c, d} {
		if err := db.CreateSandbox(ctx, sb); err != nil {
			t.Fatalf("sandboxes without keys: %v", err)
		}
	}
	other := sample("e")
	other.Workspace, other.Key = "acme", "conversation-1"
	if err := db.CreateSandbox(ctx, other); err != nil {
		t.Fatalf("the same key in another workspace: %v", err)
	}
	if got, err := db.GetSandboxByKey(ctx, "acme", "conversation-1"); err != nil || got.ID != "e" {
		t.Errorf("GetSandboxByKey in workspace acme: %+v, %v", got, err)
	}
	got, err := db.GetSandboxByKey(ctx, "default", "conversation-1")
	if err != nil || got.ID != "a" || got.Key != "conversation-1" {
		t.Fatalf("GetSandboxByKey: %+v, %v", got, err)
	}
	if got, _ := db.GetSandbox(ctx, "c"); got.Key != "" {
		t.Errorf("a sandbox without a key reads back key %q", got.Key)
	}
	if err := db.DeleteSandbox(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetSandboxByKey(ctx, "default", "conversation-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the key of a deleted sandbox: %v, want not found", err)
	}
	if err := db.CreateSandbox(ctx, b); err != nil {
		t.Errorf("the key again, once free: %v", err)
	}
}

func TestProcesses(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	if err := db.CreateSandbox(ctx, sample("abc")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	web := &store.Process{SandboxID: "abc", Name: "web", Argv: []string{"python3", "-m", "http.server"},
		Cwd: "site", User: "user", Env: map[string]string{"TOKEN": "x"}, Port: 8000, Running: true, CreatedAt: now, Public: true, Slot: "preview"}
	worker := &store.Process{SandboxID: "abc", Name: "worker", Argv: []string{"sleep", "600"}, CreatedAt: now.Add(time.Second)}
	for _, p := range []*store.Process{worker, web} {
		if err := db.PutProcess(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	web.Running = false // a put replaces
	if err := db.PutProcess(ctx, web); err != nil {
		t.Fatal(err)
	}
	got, err := db.ListProcesses(ctx, "abc")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "web" || got[1].Name != "worker" {
		t.Fatalf("list = %+v, want web then worker", got)
	}
	if p := got[0]; strings.Join(p.Argv, " ") != "python3 -m http.server" || p.Cwd != "site" || p.User != "user" ||
		p.Env["TOKEN"] != "x" || p.Port != 8000 || p.Running || !p.CreatedAt.Equal(now) {
		t.Errorf("round trip changed the record: %+v", p)
	}

	if err := db.PutProcess(ctx, &store.Process{SandboxID: "nope", Name: "x", Argv: []string{"true"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("put to a missing sandbox: %v, want not found", err)
	}
	if err := db.DeleteProcess(ctx, "abc", "web"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteProcess(ctx, "abc", "web"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("delete twice: %v, want not found", err)
	}
	if err := db.DeleteSandbox(ctx, "abc"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.ListProcesses(ctx, "abc"); err != nil || len(got) != 0 {
		t.Errorf("processes outlived their sandbox: %+v, %v", got, err)
	}
}

func TestVolumes(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, name := range []string{"ws", "cache"} {
		if err := db.CreateVolume(ctx, &store.Volume{Name: name, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateVolume(ctx, &store.Volume{Name: "ws", CreatedAt: now}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second ws: %v, want already exists", err)
	}
	vols, err := db.ListVolumes(ctx)
	if err != nil || len(vols) != 2 || vols[0].Name != "cache" || !vols[1].CreatedAt.Equal(now) {
		t.Fatalf("list: %+v, %v", vols, err)
	}
	sb := sample("abc")
	sb.Volumes = []store.VolumeMount{{Name: "ws", Path: "/mnt/ws", Access: "rw"}}
	if err := db.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetSandbox(ctx, "abc"); err != nil || len(got.Volumes) != 1 || got.Volumes[0] != sb.Volumes[0] {
		t.Errorf("a sandbox's volumes: %+v, %v", got, err)
	}
	if err := db.DeleteVolume(ctx, "ws"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteVolume(ctx, "ws"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("delete twice: %v, want not found", err)
	}
}

func TestAPIKeys(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ci := &store.APIKey{Name: "ci", Hash: "h1", ToolsMode: "all", NetworkMode: "allowlist", CreatedAt: now}
	// A key made without a network mode has full (as one made before
	// network modes were).
	for _, k := range []*store.APIKey{ci, {Name: "dev", Hash: "h2", ToolsMode: "off", CreatedAt: now}} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateAPIKey(ctx, &store.APIKey{Name: "ci", Hash: "h3", ToolsMode: "all", CreatedAt: now}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second ci: %v, want already exists", err)
	}
	if got, err := db.APIKeyByHash(ctx, "h1"); err != nil || *got != *ci {
		t.Errorf("by hash: %+v, %v; want %+v", got, err, ci)
	}
	if _, err := db.APIKeyByHash(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("an unknown hash: %v", err)
	}
	if keys, err := db.ListAPIKeys(ctx); err != nil || len(keys) != 2 || keys[1].Name != "dev" || keys[1].ToolsMode != "off" || keys[1].NetworkMode != "full" {
		t.Errorf("list: %+v, %v", keys, err)
	}
	if err := db.DeleteAPIKey(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAPIKey(ctx, "ci"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("deleting it again: %v", err)
	}
}
