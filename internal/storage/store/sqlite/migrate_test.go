package sqlite

import (
	"compress/gzip"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/migrations"
	"github.com/hutchdev/hutch/internal/storage/store/storetest"
)

// A database made before the migrations were shared (testdata/v14.db.gz:
// made by that code, at schema version 14, with a record of each kind)
// opens with its recorded version taken as it is, and reads back.
func TestOpenOldDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	gunzip(t, "testdata/v14.db.gz", path)
	if v := userVersion(t, path); v != 14 {
		t.Fatalf("the old database is at version %d, want 14", v)
	}
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	at := time.Date(2026, 11, 25, 12, 0, 0, 123456789, time.UTC)
	sb, err := db.GetSandboxByKey(ctx, "default", "conversation-1")
	if err != nil || sb.ID != "old1" || !sb.CreatedAt.Equal(at) || sb.Env["A"] != "b" || sb.User != "u-42" {
		t.Errorf("its sandbox: %+v, %v", sb, err)
	}
	if ps, err := db.ListProcesses(ctx, "old1"); err != nil || len(ps) != 1 || ps[0].Slot != "preview" || !ps[0].Public || ps[0].Port != 8000 {
		t.Errorf("its process: %+v, %v", ps, err)
	}
	if vs, err := db.ListVolumes(ctx); err != nil || len(vs) != 1 || vs[0].Name != "ws" {
		t.Errorf("its volume: %+v, %v", vs, err)
	}
	if k, err := db.APIKeyByHash(ctx, "h1"); err != nil || k.Name != "ci" || k.Workspace != "acme" || k.NetworkMode != "allowlist" {
		t.Errorf("its key: %+v, %v", k, err)
	}
	if w, err := db.GetWorkspace(ctx, "acme"); err != nil || w.Quota != (store.Quota{Sandboxes: 3}) {
		t.Errorf("its workspace: %+v, %v", w, err)
	}
	if d, err := db.SandboxTime(ctx, "acme", "2026-11-25"); err != nil || d != time.Hour {
		t.Errorf("its sandbox time: %v, %v", d, err)
	}
	if es, err := db.ListAudit(ctx, store.AuditFilter{}); err != nil || len(es) != 1 || es[0].Object != "old1" {
		t.Errorf("its audit log: %+v, %v", es, err)
	}
	if s, err := db.GetSecret(ctx, "acme", "", "TOKEN"); err != nil || string(s.Sealed) != "sealed" {
		t.Errorf("its secret: %+v, %v", s, err)
	}
	if c, err := db.VaultCheck(ctx); err != nil || string(c) != "check" {
		t.Errorf("its key check: %q, %v", c, err)
	}
	// It takes what is new.
	if err := db.CreateSandbox(ctx, storetest.Sample("new")); err != nil {
		t.Errorf("a new sandbox in an old database: %v", err)
	}
	all, _ := migrations.For(migrations.SQLite)
	if v := userVersion(t, path); v != len(all) {
		t.Errorf("at version %d after Open, want %d", v, len(all))
	}
}

// A database that an older binary migrated part of the way (user_version
// 11) is taken on from there, keeping its records.
func TestMigrateFromOlderVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	all, err := migrations.For(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all[:11] {
		if _, err := raw.Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	if _, err := raw.Exec(`PRAGMA user_version = 11`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO sandboxes (id, template, backend, state, cpus, memory_mb, pids, idle_timeout_s, created_at, updated_at, key)
		VALUES ('old', 'base', 'runc', 'running', 1, 512, 256, 0, 1, 1, 'k')`); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// What migration 12 gave it: the default workspace, and the key in it.
	if sb, err := db.GetSandboxByKey(t.Context(), "default", "k"); err != nil || sb.ID != "old" || sb.Workspace != "default" {
		t.Errorf("its sandbox after the rest of the migrations: %+v, %v", sb, err)
	}
	if v := userVersion(t, path); v != len(all) {
		t.Errorf("at version %d after Open, want %d", v, len(all))
	}
}

// A database newer than the binary is refused, not opened.
func TestNewerDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hutch.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := migrations.For(migrations.SQLite)
	if _, err := raw.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, len(all)+1)); err != nil {
		t.Fatal(err)
	}
	_ = raw.Close()
	if db, err := Open(t.Context(), path); err == nil {
		_ = db.Close()
		t.Fatal("opened a database newer than the binary")
	}
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v int
	if err := raw.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func gunzip(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, z); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
