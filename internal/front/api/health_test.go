package api

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/logring"
)

// The administrator's health has the data dir's disk and the daemon's
// recent warnings and errors; a key's has neither (the fields are absent),
// and the rest alike.
func TestHealthAdminOnlyParts(t *testing.T) {
	t.Parallel()
	ring := logring.New(10)
	dataDir := t.TempDir()
	s := newTestServer(t, func(c *Config) { c.DataDir, c.RecentLog = dataDir, ring })
	log := slog.New(ring.Handler(nil))
	log.Info("not kept")
	log.Warn("backend not usable", "backend", "gvisor", "sandbox_id", "of-ws-b")

	code, body := s.admin().raw(t, "GET", "/v1/health", "")
	if code != 200 {
		t.Fatalf("admin: %d %s", code, body)
	}
	var admin client.Health
	if err := json.Unmarshal([]byte(body), &admin); err != nil {
		t.Fatal(err)
	}
	if d := admin.Disk; d == nil || d.Path != dataDir || d.TotalBytes == 0 || d.FreeBytes > d.TotalBytes {
		t.Errorf("admin's disk: %+v", admin.Disk)
	}
	if len(admin.RecentErrors) != 1 {
		t.Fatalf("admin's recent errors: %+v", admin.RecentErrors)
	}
	rec := admin.RecentErrors[0]
	if rec.Level != "WARN" || rec.Message != "backend not usable" || rec.Attrs["backend"] != "gvisor" || rec.Time.IsZero() {
		t.Errorf("admin's recent error: %+v", rec)
	}

	for _, k := range []keyed{s.keyIn(t, "app-b", "ws-b"), s.keyIn(t, "app-own", "")} {
		code, body := k.raw(t, "GET", "/v1/health", "")
		if code != 200 {
			t.Fatalf("key: %d %s", code, body)
		}
		for _, field := range []string{`"disk"`, `"recent_errors"`, "of-ws-b", dataDir} {
			if strings.Contains(body, field) {
				t.Errorf("a key's health has %s: %s", field, body)
			}
		}
		var h client.Health
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatal(err)
		}
		if h.Status != "ok" || h.Version != admin.Version || h.DefaultRuntime != admin.DefaultRuntime || len(h.Backends) != len(admin.Backends) || h.Pools == nil {
			t.Errorf("a key's health differs from the administrator's in what it shares: %+v", h)
		}
	}
}

// With nothing logged, the administrator reads an empty list of recent
// errors, not none: "none happened", not "not yours to see". A daemon
// given no data dir tells no disk.
func TestHealthNoRecentErrors(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, func(c *Config) { c.RecentLog = logring.New(10) })
	code, body := s.admin().raw(t, "GET", "/v1/health", "")
	if code != 200 || !strings.Contains(body, `"recent_errors":[]`) || strings.Contains(body, `"disk"`) {
		t.Errorf("got %d %s, want an empty recent_errors and no disk", code, body)
	}
}
