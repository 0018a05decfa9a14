package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

func testVolumes(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	now := now()
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
	sb := Sample("abc")
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

func testAPIKeys(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	now := now()
	ci := &store.APIKey{Name: "ci", Hash: "h1", ToolsMode: "all", NetworkMode: "allowlist", Workspace: "acme", CreatedAt: now}
	// A key made without a network mode has full (as one made before
	// network modes were).
	for _, k := range []*store.APIKey{ci, {Name: "dev", Hash: "h2", ToolsMode: "off", Workspace: "default", CreatedAt: now}} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateAPIKey(ctx, &store.APIKey{Name: "ci", Hash: "h3", ToolsMode: "all", CreatedAt: now}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second ci: %v, want already exists", err)
	}
	if err := db.CreateAPIKey(ctx, &store.APIKey{Name: "other", Hash: "h1", ToolsMode: "all", CreatedAt: now}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("another key with ci's hash: %v, want already exists", err)
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

// Workspaces are made once, keep their quota, and count sandbox time per
// day; "default" is there from the start.
func testWorkspaces(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	now := now()
	if w, err := db.GetWorkspace(ctx, "default"); err != nil || w.Quota != (store.Quota{}) {
		t.Fatalf("the default workspace: %+v, %v", w, err)
	}
	if _, err := db.GetWorkspace(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a missing workspace: %v, want not found", err)
	}
	w, err := db.EnsureWorkspace(ctx, "acme", now)
	if err != nil || w.Name != "acme" || !w.CreatedAt.Equal(now) {
		t.Fatalf("EnsureWorkspace: %+v, %v", w, err)
	}
	q := store.Quota{Sandboxes: 3, MemoryMB: 2048, CPUs: 2.5, DiskMB: 10000, SandboxHours: 1.5}
	if err := db.SetQuota(ctx, "acme", q, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if w, err := db.EnsureWorkspace(ctx, "acme", now.Add(time.Hour)); err != nil || w.Quota != q || !w.CreatedAt.Equal(now) ||
		!w.UpdatedAt.Equal(now.Add(time.Second)) {
		t.Errorf("EnsureWorkspace of a known one: %+v, %v; want its quota and time kept", w, err)
	}
	if list, err := db.ListWorkspaces(ctx); err != nil || len(list) != 2 || list[0].Name != "acme" {
		t.Errorf("ListWorkspaces: %+v, %v", list, err)
	}
	// A quota set on a workspace not yet known makes it.
	if err := db.SetQuota(ctx, "zeta", q, now); err != nil {
		t.Fatal(err)
	}
	if w, err := db.GetWorkspace(ctx, "zeta"); err != nil || w.Quota != q {
		t.Errorf("a workspace made by its quota: %+v, %v", w, err)
	}
	for range 3 {
		if err := db.AddSandboxTime(ctx, "acme", "2026-11-25", 20*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := db.SandboxTime(ctx, "acme", "2026-11-25"); err != nil || d.Round(time.Second) != time.Hour {
		t.Errorf("SandboxTime: %v, %v; want 1h", d, err)
	}
	if d, err := db.SandboxTime(ctx, "acme", "2026-11-26"); err != nil || d != 0 {
		t.Errorf("SandboxTime of another day: %v, %v; want 0", d, err)
	}
}

// Several callers making one workspace, and adding to its day, neither
// fail nor lose an addition.
func testWorkspacesConcurrently(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	const n = 8
	errs := make(chan error, 2*n)
	for range n {
		go func() {
			_, err := db.EnsureWorkspace(ctx, "acme", now())
			errs <- err
		}()
		go func() { errs <- db.AddSandboxTime(ctx, "acme", "2026-11-25", time.Minute) }()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Errorf("concurrently: %v", err)
		}
	}
	if d, err := db.SandboxTime(ctx, "acme", "2026-11-25"); err != nil || d.Round(time.Second) != n*time.Minute {
		t.Errorf("SandboxTime: %v, %v; want %v", d, err, n*time.Minute)
	}
}

// The audit log lists newest first, by workspace, a page at a time, and
// refuses to change.
func testAudit(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := t.Context()
	at := now()
	for i, ws := range []string{"acme", "other", "acme"} {
		e := &store.AuditEntry{Time: at, Key: "k", Workspace: ws, User: "u-1", Action: "POST /v1/sandboxes", Object: "sb" + string(rune('0'+i)),
			Status: 201, Code: "created"}
		if err := db.AppendAudit(ctx, e); err != nil || e.ID != int64(i+1) {
			t.Fatalf("AppendAudit: id %d, %v", e.ID, err)
		}
	}
	list, err := db.ListAudit(ctx, store.AuditFilter{Workspace: "acme"})
	if err != nil || len(list) != 2 || list[0].ID != 3 || list[1].Object != "sb0" {
		t.Fatalf("ListAudit of acme: %+v, %v", list, err)
	}
	want := store.AuditEntry{ID: 3, Time: at, Key: "k", Workspace: "acme", User: "u-1", Action: "POST /v1/sandboxes", Object: "sb2", Status: 201, Code: "created"}
	if *list[0] != want {
		t.Errorf("an entry read back: %+v, want %+v", *list[0], want)
	}
	if list, err := db.ListAudit(ctx, store.AuditFilter{Before: 3, Limit: 1}); err != nil || len(list) != 1 || list[0].ID != 2 {
		t.Errorf("ListAudit's next page: %+v, %v", list, err)
	}
	// Several entries go in one call, each with its own ID.
	two := []*store.AuditEntry{{Time: at, Action: "DELETE /v1/sandboxes/{id}", Status: 204}, {Time: at, Action: "GET /v1/secrets", Status: 200}}
	// #nosec G602 -- two has two entries
	if err := db.AppendAudit(ctx, two...); err != nil || two[0].ID != 4 || two[1].ID != 5 {
		t.Errorf("AppendAudit of two: ids %d, %d, %v", two[0].ID, two[1].ID, err)
	}
	if list, err := db.ListAudit(ctx, store.AuditFilter{Workspace: "nobody"}); err != nil || list == nil || len(list) != 0 {
		t.Errorf("ListAudit of a workspace with none: %#v, %v; want an empty list", list, err)
	}
	for _, stmt := range []string{`UPDATE audit SET status = 200`, `DELETE FROM audit`} {
		if err := h.Exec(ctx, db, stmt); err == nil {
			t.Errorf("%s: changed the audit log", stmt)
		}
	}
	if list, err := db.ListAudit(ctx, store.AuditFilter{}); err != nil || len(list) != 5 || list[4].Status != 201 {
		t.Errorf("the audit log after attempts to change it: %+v, %v", list, err)
	}
}
