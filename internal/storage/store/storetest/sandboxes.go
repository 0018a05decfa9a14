package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
)

func testSandboxRoundTrip(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	sb := Sample("abc")
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
	// Every field comes back as it went in.
	if !reflect.DeepEqual(got, withNetwork(sb)) {
		t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got, sb)
	}

	// A change of state applies from the state it names, and changes
	// nothing else.
	at := now().Add(time.Second)
	if err := db.ChangeState(ctx, store.StateChange{ID: "abc", From: []store.State{store.Paused, store.Running},
		To: store.Error, Reason: "container died", At: at}); err != nil {
		t.Fatal(err)
	}
	again, _ := db.GetSandbox(ctx, "abc")
	if again.State != store.Error || again.StateReason != "container died" || !again.UpdatedAt.Equal(at) ||
		string(again.Handle) != `{"dir":"/x"}` || again.Env["A"] != "b" {
		t.Fatalf("change lost, or more changed: %+v", again)
	}
	err = db.ChangeState(ctx, store.StateChange{ID: "abc", From: []store.State{store.Running}, To: store.Paused, At: at})
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "is error, not running") {
		t.Fatalf("change from a state it is not in: %v", err)
	}
	if err := db.ChangeState(ctx, store.StateChange{ID: "abc", From: []store.State{store.Error}, To: store.Running,
		At: at, Handle: []byte(`{"dir":"/y"}`)}); err != nil {
		t.Fatal(err)
	}
	// Timers, and nothing else.
	if err := db.SetTimers(ctx, "abc", store.Timers{IdleTimeout: time.Minute, IdleAction: store.IdleStop, ExpiresAt: at.Add(time.Hour), At: at}); err != nil {
		t.Fatal(err)
	}
	again, _ = db.GetSandbox(ctx, "abc")
	if string(again.Handle) != `{"dir":"/y"}` || again.State != store.Running || again.IdleTimeout != time.Minute ||
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
	// A new shape, and nothing else.
	shape := store.Shape{Env: map[string]string{"NEW": "env"}, Metadata: map[string]string{"stage": "two"}, CPUs: 0.5, MemoryMB: 1024, Pids: 64, DiskMB: 4096, Volumes: []store.VolumeMount{{Name: "data", Path: "/mnt/data", Access: "rw"}}, At: at}
	if err := db.Reshape(ctx, "abc", shape); err != nil {
		t.Fatal(err)
	}
	again, _ = db.GetSandbox(ctx, "abc")
	if !reflect.DeepEqual(again.Env, shape.Env) || !reflect.DeepEqual(again.Metadata, shape.Metadata) || again.CPUs != 0.5 ||
		again.MemoryMB != 1024 || again.Pids != 64 || !reflect.DeepEqual(again.Network, policy) || again.DiskMB != 4096 ||
		!reflect.DeepEqual(again.Volumes, shape.Volumes) {
		t.Fatalf("after a new shape: %+v", again)
	}

	// Going to deleting gives up the key, and only that.
	keyed := Sample("keyed")
	keyed.Key = "conversation-1"
	if err := db.CreateSandbox(ctx, keyed); err != nil {
		t.Fatal(err)
	}
	if err := db.ChangeState(ctx, store.StateChange{ID: "keyed", From: []store.State{store.Running}, To: store.Deleting, At: at}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetSandbox(ctx, "keyed"); err != nil || got.Key != "" || got.State != store.Deleting || got.Env["A"] != "b" {
		t.Fatalf("a keyed sandbox going to deleting: %+v, %v; want its key given up", got, err)
	}
	if _, err := db.GetSandboxByKey(ctx, "default", "conversation-1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the key of a sandbox being deleted: %v, want not found", err)
	}
}

// withNetwork is sb as stored when made: mode none when it has no policy.
func withNetwork(sb *store.Sandbox) *store.Sandbox {
	c := *sb
	if c.Network.Mode == "" {
		c.Network.Mode = netpolicy.None
	}
	if c.Volumes == nil {
		c.Volumes = []store.VolumeMount{}
	}
	return &c
}

// Of changes racing from one state, exactly one applies.
func testChangeStateRace(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	if err := db.CreateSandbox(ctx, Sample("r")); err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			to := store.Paused
			if i%2 == 1 {
				to = store.Suspending
			}
			errs <- db.ChangeState(ctx, store.StateChange{ID: "r", From: []store.State{store.Running}, To: to, At: now()})
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

func testSandboxErrors(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	if err := db.CreateSandbox(ctx, Sample("a")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate create", db.CreateSandbox(ctx, Sample("a")), errdefs.ErrAlreadyExists},
		{"get missing", func() error { _, err := db.GetSandbox(ctx, "nope"); return err }(), errdefs.ErrNotFound},
		{"get missing key", func() error { _, err := db.GetSandboxByKey(ctx, "default", "nope"); return err }(), errdefs.ErrNotFound},
		{"change state of missing", db.ChangeState(ctx, store.StateChange{ID: "nope", From: []store.State{store.Running}, To: store.Error}), errdefs.ErrNotFound},
		{"set timers of missing", db.SetTimers(ctx, "nope", store.Timers{}), errdefs.ErrNotFound},
		{"set network of missing", db.SetNetwork(ctx, "nope", netpolicy.Policy{Mode: netpolicy.Full}, time.Now()), errdefs.ErrNotFound},
		{"reshape missing", db.Reshape(ctx, "nope", store.Shape{}), errdefs.ErrNotFound},
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

// Sandboxes list in the order they were made; a deleted one is gone.
func testListSandboxes(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	for i, id := range []string{"b", "a", "c"} {
		sb := Sample(id)
		sb.CreatedAt = sb.CreatedAt.Add(time.Duration(i) * time.Second)
		if err := db.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteSandbox(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	list, err := db.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "b" || list[1].ID != "c" {
		t.Fatalf("list = %v, want b, c in creation order", list)
	}
}

// A key finds its sandbox, belongs to one at most in a workspace (another
// workspace's same key is another's), and is free again once that sandbox
// goes; sandboxes without keys are many.
func testSandboxKeys(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	a, b, c, d := Sample("a"), Sample("b"), Sample("c"), Sample("d")
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
	other := Sample("e")
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

// Of creates racing with one key, exactly one makes a sandbox: the key
// decides a get-or-create raced by several daemons sharing the store.
func testSandboxKeyRace(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			sb := Sample(fmt.Sprintf("k%d", i))
			sb.Key = "conversation-1"
			errs <- db.CreateSandbox(ctx, sb)
		}()
	}
	made := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			made++
		case !errors.Is(err, errdefs.ErrAlreadyExists):
			t.Errorf("racing create: %v", err)
		}
	}
	if list, err := db.ListSandboxes(ctx); made != 1 || err != nil || len(list) != 1 {
		t.Errorf("%d racing creates with one key made a sandbox, %d listed (%v); want 1", made, len(list), err)
	}
}

// testLinksRevoked: a revocation of a process's links is set alone, and
// neither an earlier one nor a put of the process (from a read before it,
// or of a new process of its name) moves it back.
func testLinksRevoked(t *testing.T, db Store, web *store.Process) {
	t.Helper()
	ctx := t.Context()
	revokedAt := func() time.Time {
		t.Helper()
		got, err := db.ListProcesses(ctx, web.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range got {
			if p.Name == web.Name {
				return p.LinksRevokedAt
			}
		}
		t.Fatalf("%s is gone", web.Name)
		return time.Time{}
	}
	at := now()
	if err := db.SetLinksRevoked(ctx, web.SandboxID, web.Name, at); err != nil {
		t.Fatal(err)
	}
	if got := revokedAt(); !got.Equal(at) {
		t.Fatalf("links revoked at %v, want %v", got, at)
	}
	if err := db.SetLinksRevoked(ctx, web.SandboxID, web.Name, at.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	stale := *web // read before the revocation
	stale.Running, stale.LinksRevokedAt = true, time.Time{}
	if err := db.PutProcess(ctx, &stale); err != nil {
		t.Fatal(err)
	}
	if got := revokedAt(); !got.Equal(at) {
		t.Errorf("after an earlier revocation and a put without one: links revoked at %v, want %v", got, at)
	}
	later := stale
	later.LinksRevokedAt = at.Add(time.Second)
	if err := db.PutProcess(ctx, &later); err != nil {
		t.Fatal(err)
	}
	got, err := db.ListProcesses(ctx, web.SandboxID)
	if err != nil || len(got) == 0 || !reflect.DeepEqual(got[0], &later) {
		t.Errorf("a put of a later revocation: %+v, %v; want %+v", got, err, later)
	}
	if err := db.SetLinksRevoked(ctx, web.SandboxID, "nope", at); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("revoke links of a missing process: %v, want not found", err)
	}
}

func testProcesses(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	if err := db.CreateSandbox(ctx, Sample("abc")); err != nil {
		t.Fatal(err)
	}
	now := now()
	web := &store.Process{SandboxID: "abc", Name: "web", Argv: []string{"python3", "-m", "http.server"},
		Cwd: "site", User: "user", Env: map[string]string{"TOKEN": "x"}, Port: 8000, Running: true, CreatedAt: now, Public: true, Slot: "preview",
		ForUser: "u-7", Stdin: true}
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
	if !reflect.DeepEqual(got[0], web) {
		t.Errorf("round trip changed the record:\n got %+v\nwant %+v", got[0], web)
	}

	if err := db.PutProcess(ctx, &store.Process{SandboxID: "nope", Name: "x", Argv: []string{"true"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("put to a missing sandbox: %v, want not found", err)
	}
	testLinksRevoked(t, db, web)
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
