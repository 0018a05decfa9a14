package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// A replica answers GET /v1/nodes itself, from the store, sending nothing
// to a node: every node, up or lost (marked so, or silent for longer than
// the timeout and not marked yet), each lost one with why. Only the
// daemon's own key may read it: a workspace's key gets 403, no key or a
// wrong one 401, as from a node.
func TestReplicaListsNodes(t *testing.T) {
	ctx := t.Context()
	db := openStore(t)
	key, _, err := apikeys.New(db, nil).Create(ctx, apikeys.CreateRequest{Name: "acme-key", Workspace: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	n := startFakeNode(t, DeriveKey(adminKey), nil)
	up := n.record("a")
	up.Report.Warm, up.Report.Sandboxes, up.Report.Version = map[string]int{"host@runc": 2}, 3, "1.2.3"
	marked := n.record("b")
	marked.State, marked.Reason, marked.HeartbeatAt = store.NodeLost, "node b lost: no heartbeat since then", time.Now().Add(-time.Hour).UTC()
	silent := n.record("c")
	silent.HeartbeatAt = time.Now().Add(-time.Hour).UTC()
	for _, rec := range []*store.Node{up, marked, silent} {
		if err := db.PutNode(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	replica := startReplica(t, db)

	for name, h := range map[string]struct {
		header http.Header
		want   int
	}{
		"no key":                           {nil, http.StatusUnauthorized},
		"a wrong key":                      {http.Header{"Authorization": {"Bearer hutch_wrong"}}, http.StatusUnauthorized},
		"a workspace's key":                {http.Header{"Authorization": {"Bearer " + key}}, http.StatusForbidden},
		"a forged cluster key":             {http.Header{HeaderClusterKey: {DeriveKey("guess")}}, http.StatusUnauthorized},
		"a workspace's key, a WebSocket's": {http.Header{"Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {"hutch.v1, hutch.bearer." + key}}, http.StatusForbidden},
	} {
		code, body := call(t, http.MethodGet, replica.URL+"/v1/nodes", h.header)
		if code != h.want || strings.Contains(body, n.addr) {
			t.Errorf("%s: %d %s, want %d and nothing of the nodes", name, code, body, h.want)
		}
	}

	code, body := call(t, http.MethodGet, replica.URL+"/v1/nodes", http.Header{"Authorization": {"Bearer " + adminKey}})
	var got []client.Node
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil || len(got) != 3 {
		t.Fatalf("the daemon's own key: %d %s (%v), want the three nodes", code, body, err)
	}
	want := []struct{ id, state, reason string }{
		{"a", "up", ""},
		{"b", "lost", "node b lost: no heartbeat since then"},
		{"c", "lost", "node c lost: no heartbeat since "},
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Role != RoleNode || g.State != w.state || !strings.HasPrefix(g.Reason, w.reason) || w.reason == "" && g.Reason != "" {
			t.Errorf("node %d: %+v, want %s %s %q", i, g, w.id, w.state, w.reason)
		}
	}
	if a := got[0]; a.URL != "https://"+n.addr || a.CPUs != 8 || a.Sandboxes != 3 || a.Warm["host@runc"] != 2 || a.Templates["host"] != "1" || a.Version != "1.2.3" {
		t.Errorf("node a: %+v", a)
	}
	if n.calls != 0 {
		t.Errorf("%d calls sent to a node, want none: the replica answers itself", n.calls)
	}
}

// A single box lists itself, up, from its report: empty maps and lists,
// not null.
func TestSingleListsItself(t *testing.T) {
	started := time.Now().Add(-time.Minute).UTC()
	s := Single{ID: "box", URL: "http://127.0.0.1:7070", StartedAt: started, Report: func(context.Context) (store.NodeReport, error) {
		return store.NodeReport{CPUs: 4, MemoryMB: 8192, Sandboxes: 2, Version: "1.2.3"}, nil
	}}
	got, err := s.Nodes(t.Context())
	if err != nil || len(got) != 1 {
		t.Fatalf("%+v, %v", got, err)
	}
	n := got[0]
	if n.ID != "box" || n.Role != RoleAll || n.State != "up" || n.Reason != "" || n.URL != s.URL || !n.StartedAt.Equal(started) ||
		time.Since(n.HeartbeatAt) > time.Minute || n.CPUs != 4 || n.Sandboxes != 2 || n.Version != "1.2.3" {
		t.Errorf("the box: %+v", n)
	}
	b, _ := json.Marshal(n)
	for _, empty := range []string{`"templates":{}`, `"warm":{}`, `"runtimes":[]`} {
		if !strings.Contains(string(b), empty) {
			t.Errorf("the box's JSON %s has no %s", b, empty)
		}
	}
}
