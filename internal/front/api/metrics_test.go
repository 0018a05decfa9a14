package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/core/metrics"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// withMetrics gives a test server the daemon's metrics, reading its
// sandboxes, and keeps its Config for a second listener.
func withMetrics(kept *Config) func(*Config) {
	return func(cfg *Config) {
		cfg.Metrics = metrics.New(metrics.Config{Version: "test", State: metrics.State{
			Sandboxes: func(ctx context.Context) ([]*store.Sandbox, error) { return cfg.Manager.List(ctx) },
		}})
		*kept = *cfg
	}
}

// The metrics name every workspace and what it uses: a workspace's key
// may not read them, on the API's listener or on --metrics-listen's, and
// no series names a sandbox.
func TestAttackMetricsAdminOnly(t *testing.T) {
	t.Parallel()
	requireFakeAgent(t)
	var cfg Config
	s := newTestServer(t, withMetrics(&cfg))
	ctx := t.Context()
	acme := s.keyIn(t, "acme-key", "acme")
	sb, err := acme.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acme.DeleteSandbox(context.WithoutCancel(t.Context()), sb.ID) })
	if status, body := acme.raw(t, http.MethodGet, "/v1/sandboxes/nosuchbox", ""); status != http.StatusNotFound {
		t.Fatalf("an unknown sandbox: %d %s", status, body)
	}

	sep := httptest.NewServer(New(cfg).MetricsHandler())
	t.Cleanup(sep.Close)
	for _, url := range []string{s.url, sep.URL} {
		if status, body := (keyed{url: url, key: acme.key}).raw(t, http.MethodGet, "/metrics", ""); status != http.StatusForbidden {
			t.Errorf("%s: a workspace's key read the metrics: %d %.200s", url, status, body)
		}
		if status, body := (keyed{url: url, key: "hutch_wrong"}).raw(t, http.MethodGet, "/metrics", ""); status != http.StatusUnauthorized {
			t.Errorf("%s: a wrong key read the metrics: %d %.200s", url, status, body)
		}
		status, body := (keyed{url: url, key: testKey}).raw(t, http.MethodGet, "/metrics", "")
		if status != http.StatusOK {
			t.Fatalf("%s: the administrator's metrics: %d %.200s", url, status, body)
		}
		for _, want := range []string{
			`hutch_sandboxes{runtime="fake",state="running",workspace="acme"} 1`,
			`hutch_api_errors_total{error="not_found",method="GET",route="/v1/sandboxes/{id}"} 1`,
			`hutch_api_requests_total{code="201",method="POST",route="/v1/sandboxes"} 1`,
			`hutch_build_info{version="test"} 1`,
			"go_goroutines ",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the metrics lack %s", url, want)
			}
		}
		if strings.Contains(body, sb.ID) {
			t.Errorf("%s: a series names sandbox %s", url, sb.ID)
		}
	}
	if status, body := (keyed{url: sep.URL, key: testKey}).raw(t, http.MethodGet, "/v1/sandboxes", ""); status != http.StatusNotFound {
		t.Errorf("the metrics listener served the API: %d %.200s", status, body)
	}
}
