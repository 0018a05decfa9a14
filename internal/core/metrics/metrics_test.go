package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// scrape is what m's handler answers.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(w.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	if w.Code != 200 {
		t.Fatalf("scrape: %d %s", w.Code, b)
	}
	return string(b)
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("no line %q in the metrics", l)
		}
	}
}

func TestSteps(t *testing.T) {
	t.Parallel()
	steps := NewSteps()
	steps.Observed(hook.Step{Name: "create", Runtime: "runc", Pool: "hit", Took: 3 * time.Millisecond})
	steps.Observed(hook.Step{Name: "create", Runtime: "runc", Pool: "miss", Took: 300 * time.Millisecond})
	steps.Observed(hook.Step{Name: "create", Runtime: "gvisor", Took: 2 * time.Second, Err: errors.New("no")})
	steps.Observed(hook.Step{Name: "resume", Runtime: "gvisor", Took: 400 * time.Millisecond})
	steps.Observed(hook.Step{Name: "build", Runtime: "runc", Took: 90 * time.Second})
	steps.Observed(hook.Step{Name: "no such step"}) // counted nowhere
	m := New(Config{Steps: steps, Version: "v1"})
	m.Request("GET /v1/sandboxes/{id}", 404, "not_found", time.Millisecond)
	m.Request("* /mcp", 200, "", time.Millisecond)
	body := scrape(t, m)
	wantLines(t, body,
		`hutch_sandbox_create_seconds_count{outcome="ok",runtime="runc"} 2`,
		`hutch_sandbox_create_seconds_bucket{outcome="ok",runtime="runc",le="0.005"} 1`,
		`hutch_sandbox_create_seconds_count{outcome="error",runtime="gvisor"} 1`,
		`hutch_sandbox_resume_seconds_sum{outcome="ok",runtime="gvisor"} 0.4`,
		`hutch_warm_pool_claims_total{outcome="hit",runtime="runc"} 1`,
		`hutch_warm_pool_claims_total{outcome="miss",runtime="runc"} 1`,
		`hutch_template_build_seconds_count{outcome="ok"} 1`,
		`hutch_api_requests_total{code="404",method="GET",route="/v1/sandboxes/{id}"} 1`,
		`hutch_api_errors_total{error="not_found",method="GET",route="/v1/sandboxes/{id}"} 1`,
		`hutch_api_requests_total{code="200",method="*",route="/mcp"} 1`,
		`hutch_build_info{version="v1"} 1`,
	)
	if strings.Contains(body, `hutch_api_errors_total{error="",method="*"`) {
		t.Error("a success counted as an error")
	}
}

func TestState(t *testing.T) {
	t.Parallel()
	recs := []*store.Sandbox{
		{ID: "sb1", State: store.Running, Backend: "runc", Workspace: "acme", Node: "here", MemoryMB: 512, CPUs: 1, DiskMB: 1024},
		{ID: "sb2", State: store.Running, Backend: "runc", Workspace: "acme", Node: "here", MemoryMB: 512, CPUs: 1, DiskMB: 1024},
		{ID: "sb3", State: store.Suspended, Backend: "gvisor", Workspace: "acme", Node: "here", MemoryMB: 512, CPUs: 1, DiskMB: 1024},
		{ID: "sb4", State: store.Running, Backend: "runc", Workspace: "acme", Node: "there", MemoryMB: 256, CPUs: 0.5, DiskMB: 1024},
	}
	m := New(Config{State: State{
		Node:      "here",
		Sandboxes: func(context.Context) ([]*store.Sandbox, error) { return recs, nil },
		Pools: func(context.Context) []Pool {
			return []Pool{{Template: "base", Runtime: "runc", Size: 2, Ready: 1}}
		},
		Workspaces: func(context.Context) ([]store.Workspace, error) {
			return []store.Workspace{{Name: "acme", Quota: store.Quota{Sandboxes: 10, MemoryMB: 4096}}, {Name: "free"}}, nil
		},
		Nodes: func(context.Context) ([]*store.Node, error) {
			return []*store.Node{
				{ID: "here", State: store.NodeUp, HeartbeatAt: time.Now(), Report: store.NodeReport{Sandboxes: 3}},
				{ID: "there", State: store.NodeLost, HeartbeatAt: time.Now().Add(-time.Minute)},
			}, nil
		},
		Egress: func() (network.Counters, map[network.Refusal]int64) {
			return network.Counters{BytesOut: 100, BytesIn: 2000, Connections: 3}, map[network.Refusal]int64{{Kind: "tcp", By: "mode"}: 4}
		},
	}})
	body := scrape(t, m)
	wantLines(t, body,
		`hutch_sandboxes{runtime="runc",state="running",workspace="acme"} 2`,
		`hutch_sandboxes{runtime="gvisor",state="suspended",workspace="acme"} 1`,
		`hutch_warm_pool_size{runtime="runc",template="base"} 2`,
		`hutch_warm_pool_ready{runtime="runc",template="base"} 1`,
		`hutch_workspace_quota{resource="sandboxes",workspace="acme"} 10`,
		`hutch_workspace_quota{resource="memory_bytes",workspace="acme"} 4.294967296e+09`,
		`hutch_workspace_usage{resource="sandboxes",workspace="acme"} 3`,
		`hutch_workspace_usage{resource="cpus",workspace="acme"} 2.5`,
		`hutch_workspace_usage{resource="disk_bytes",workspace="acme"} 4.294967296e+09`,
		`hutch_egress_bytes_total{direction="out"} 100`,
		`hutch_egress_bytes_total{direction="in"} 2000`,
		`hutch_egress_connections_total 3`,
		`hutch_egress_refusals_total{by="mode",kind="tcp"} 4`,
		`hutch_nodes{state="up"} 1`,
		`hutch_nodes{state="lost"} 1`,
		`hutch_node_sandboxes{node="here"} 3`,
	)
	if strings.Contains(body, `workspace="free",resource`) {
		t.Error("an unbounded quota is in the metrics")
	}
	if strings.Contains(body, `quota{resource="cpus"`) {
		t.Error("a quota the workspace does not set is in the metrics")
	}
	for _, r := range recs {
		if strings.Contains(body, r.ID) {
			t.Errorf("a series names sandbox %s", r.ID)
		}
	}
}
