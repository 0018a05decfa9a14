package api

import (
	"testing"

	"github.com/hutchdev/hutch/client"
)

// Whoami tells the daemon's key from another, with each one's workspace,
// modes and user, and the daemon's defaults to both.
func TestWhoami(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, func(c *Config) { c.Defaults = client.Defaults{NetworkMode: "allowlist"} })
	ctx := t.Context()
	k, err := s.client.CreateAPIKeyWith(ctx, client.CreateAPIKeyRequest{Name: "app", Workspace: "ws-w", ToolsMode: "selective", NetworkMode: "allowlist"})
	if err != nil {
		t.Fatal(err)
	}
	keyClient, err := client.New(s.url, k.Key, client.WithUser("alice"))
	if err != nil {
		t.Fatal(err)
	}
	want := client.Defaults{NetworkMode: "allowlist", ToolsMode: "all"}
	admin, err := s.client.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *admin != (client.Whoami{Admin: true, Workspace: "default", Defaults: want}) {
		t.Errorf("the daemon's key: %+v", admin)
	}
	key, err := keyClient.Whoami(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *key != (client.Whoami{Key: "app", Workspace: "ws-w", User: "alice", ToolsMode: "selective", NetworkMode: "allowlist", Defaults: want}) {
		t.Errorf("a key of ws-w for alice: %+v", key)
	}
}
