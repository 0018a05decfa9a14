package sqlite

import (
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/store"
)

// Workspaces are made once, keep their quota, and count sandbox time per
// day; "default" is there from the start.
func TestWorkspaces(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if w, err := db.GetWorkspace(ctx, "default"); err != nil || w.Quota != (store.Quota{}) {
		t.Fatalf("the default workspace: %+v, %v", w, err)
	}
	w, err := db.EnsureWorkspace(ctx, "acme", now)
	if err != nil || w.Name != "acme" || !w.CreatedAt.Equal(now) {
		t.Fatalf("EnsureWorkspace: %+v, %v", w, err)
	}
	q := store.Quota{Sandboxes: 3, MemoryMB: 2048, CPUs: 2.5, DiskMB: 10000, SandboxHours: 1.5}
	if err := db.SetQuota(ctx, "acme", q, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if w, err := db.EnsureWorkspace(ctx, "acme", now.Add(time.Hour)); err != nil || w.Quota != q || !w.CreatedAt.Equal(now) {
		t.Errorf("EnsureWorkspace of a known one: %+v, %v; want its quota and time kept", w, err)
	}
	if list, err := db.ListWorkspaces(ctx); err != nil || len(list) != 2 || list[0].Name != "acme" {
		t.Errorf("ListWorkspaces: %+v, %v", list, err)
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

// The audit log lists newest first, by workspace, a page at a time, and
// refuses to change.
func TestAudit(t *testing.T) {
	db := openTest(t)
	ctx := t.Context()
	for i, ws := range []string{"acme", "other", "acme"} {
		e := &store.AuditEntry{Time: time.Now(), Key: "k", Workspace: ws, Action: "POST /v1/sandboxes", Object: "sb" + string(rune('0'+i)), Status: 201}
		if err := db.AppendAudit(ctx, e); err != nil || e.ID != int64(i+1) {
			t.Fatalf("AppendAudit: id %d, %v", e.ID, err)
		}
	}
	list, err := db.ListAudit(ctx, store.AuditFilter{Workspace: "acme"})
	if err != nil || len(list) != 2 || list[0].ID != 3 || list[1].Object != "sb0" {
		t.Fatalf("ListAudit of acme: %+v, %v", list, err)
	}
	if list, err := db.ListAudit(ctx, store.AuditFilter{Before: 3, Limit: 1}); err != nil || len(list) != 1 || list[0].ID != 2 {
		t.Errorf("ListAudit's next page: %+v, %v", list, err)
	}
	for _, stmt := range []string{`UPDATE audit SET status = 200`, `DELETE FROM audit`} {
		if _, err := db.db.ExecContext(ctx, stmt); err == nil {
			t.Errorf("%s: changed the audit log", stmt)
		}
	}
}
