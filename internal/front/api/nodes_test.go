package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// nodeList is a fake Nodes.
type nodeList []client.Node

func (l nodeList) Nodes(context.Context) ([]client.Node, error) { return l, nil }

// Nodes' addresses, capacity and load are the operator's: a workspace's
// key asking for them gets 403 and learns nothing of them (not a name, an
// address, a figure); no key, 401. The daemon's own key reads them all.
func TestAttackNodesAdminOnly(t *testing.T) {
	t.Parallel()
	secret := client.Node{
		ID: "node-secret-7", Role: "node", URL: "https://10.77.0.5:7070", State: "lost", Reason: "node node-secret-7 lost: no heartbeat since then",
		StartedAt: time.Now().UTC(), HeartbeatAt: time.Now().UTC(), CPUs: 77, MemoryMB: 777777, Sandboxes: 7,
		Templates: map[string]string{"tpl-secret-7": "v7"}, Warm: map[string]int{"tpl-secret-7@runc": 7}, Runtimes: []string{"runc"}, Version: "7.7.7",
	}
	s := newTestServer(t, func(cfg *Config) { cfg.Nodes = nodeList{secret} })
	key := s.keyIn(t, "app-7", "ws-7")

	status, body := key.raw(t, "GET", "/v1/nodes", "")
	if status != 403 || !strings.Contains(body, `"permission_denied"`) {
		t.Errorf("a workspace's key: %d %s, want 403 permission_denied", status, body)
	}
	for _, m := range []string{secret.ID, "10.77.0.5", "777777", "tpl-secret-7", "7.7.7"} {
		if strings.Contains(body, m) {
			t.Errorf("a workspace's key read %s of the nodes: %s", m, body)
		}
	}
	if _, err := key.ListNodes(t.Context()); !client.IsPermissionDenied(err) {
		t.Errorf("a workspace's key through the SDK: %v, want permission denied", err)
	}
	if status, body := (keyed{url: s.url}).raw(t, "GET", "/v1/nodes", ""); status != 401 {
		t.Errorf("no key: %d %s, want 401", status, body)
	}

	got, err := s.client.ListNodes(t.Context())
	if err != nil || len(got) != 1 || got[0].ID != secret.ID || got[0].URL != secret.URL || got[0].Warm["tpl-secret-7@runc"] != 7 {
		t.Errorf("the daemon's own key: %+v, %v; want the node", got, err)
	}
}

// A daemon told of no nodes answers an empty list, not null.
func TestNodesNone(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	status, body := s.admin().raw(t, "GET", "/v1/nodes", "")
	var list []client.Node
	if err := json.Unmarshal([]byte(body), &list); status != 200 || err != nil || list == nil || len(list) != 0 {
		t.Errorf("GET /v1/nodes with no nodes: %d %s, want 200 []", status, body)
	}
}
