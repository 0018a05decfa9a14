package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
)

// Attacks on the tenant → tenant boundary of issue 36 (docs/security.md):
// what a key reaches of the administrator's and of other workspaces'
// objects, and whether every create path holds a key's ceilings.

func requireFakeAgent(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
}

// Finding 5: the administrator snapshotted a sandbox of workspace acme; a
// key of workspace other listed the snapshot, created a sandbox from it
// and read acme's files. A snapshot stays in its sandbox's workspace,
// whoever makes it.
func TestAttackAdminSnapshotShared(t *testing.T) {
	t.Parallel()
	requireFakeAgent(t)
	s := newTestServer(t)
	ctx := t.Context()
	acme, other := s.keyIn(t, "acme-app", "acme"), s.keyIn(t, "other-app", "other")
	sb, err := acme.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), sb.ID) })
	snap, err := s.client.SnapshotSandbox(ctx, sb.ID, "acme-files")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Name != "acme-files~acme" {
		t.Errorf("the administrator's snapshot of acme's sandbox is named %q to it, want acme-files~acme", snap.Name)
	}
	list, err := other.ListTemplates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range list {
		if strings.Contains(tm.Name, "acme-files") {
			t.Errorf("workspace other lists acme's snapshot: %+v", tm)
		}
	}
	for _, req := range []client.CreateSandboxRequest{{Template: "acme-files"}, {FromSnapshot: "acme-files"}, {Template: "acme-files~acme"}} {
		if stolen, err := other.CreateSandbox(ctx, req); !client.IsNotFound(err) {
			if stolen != nil {
				_ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), stolen.ID)
			}
			t.Errorf("workspace other creating from acme's snapshot (%+v): %v, want not found", req, err)
		}
	}
	mine, err := acme.CreateSandbox(ctx, client.CreateSandboxRequest{FromSnapshot: "acme-files"})
	if err != nil {
		t.Fatalf("acme creating from its own snapshot: %v", err)
	}
	_ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), mine.ID)
}

// Finding 9: a key made with network mode none created a sandbox of mode
// none and forked it; the copy had mode full. MCP's sandbox_create ignored
// the key's ceiling too. Every create path passes the core's one check.
func TestAttackNetworkCeilingOnEveryCreatePath(t *testing.T) {
	t.Parallel()
	requireFakeAgent(t)
	s := newTestServer(t)
	ctx := t.Context()
	k, err := s.client.CreateAPIKeyWith(ctx, client.CreateAPIKeyRequest{Name: "quiet", Workspace: "quiet", NetworkMode: client.NetworkNone})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := client.New(s.url, k.Key)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := quiet.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), sb.ID) })
	if sb.Network.Mode != client.NetworkNone {
		t.Errorf("REST create: mode %q, want none", sb.Network.Mode)
	}
	forks, err := quiet.ForkSandbox(ctx, sb.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), f.ID) })
		if f.Network.Mode != client.NetworkNone {
			t.Errorf("fork: mode %q, want none (its source's)", f.Network.Mode)
		}
	}

	// A sandbox of mode full in the key's workspace (the administrator
	// made it): the key cannot fork its way to it.
	inQuiet, err := client.New(s.url, testKey, client.WithWorkspace("quiet"))
	if err != nil {
		t.Fatal(err)
	}
	open, err := inQuiet.CreateSandbox(ctx, client.CreateSandboxRequest{Network: &client.NetworkPolicy{Mode: client.NetworkFull}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), open.ID) })
	if forks, err := quiet.ForkSandbox(ctx, open.ID, 1); !client.IsPermissionDenied(err) {
		for _, f := range forks {
			_ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), f.ID)
		}
		t.Errorf("a key of mode none forking a sandbox of mode full: %v, want permission denied", err)
	}

	cs := keyed{Client: quiet, url: s.url, key: k.Key}.mcp(t)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_create", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("MCP sandbox_create: %v %s", err, toolText(res))
	}
	list, err := quiet.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.ID == open.ID {
			continue
		}
		t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), x.ID) })
		if x.Network.Mode != client.NetworkNone {
			t.Errorf("sandbox %s (made by REST, fork or MCP) has mode %q, want none", x.ID, x.Network.Mode)
		}
	}
}

// Finding 15: a key made without a workspace acted in the administrator's
// (default), on its sandboxes, volumes and secrets. It gets one of its
// own; no key is made in the administrator's.
func TestAttackKeyReachesAdminWorkspace(t *testing.T) {
	t.Parallel()
	requireFakeAgent(t)
	s := newTestServer(t)
	ctx := t.Context()
	mine, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.client.DeleteSandbox(context.WithoutCancel(t.Context()), mine.ID) })
	if _, err := s.client.SetSecret(ctx, client.SetSecretRequest{Name: "ADMIN_TOKEN", Value: "the-administrators-own"}); err != nil {
		t.Fatal(err)
	}
	made, err := s.client.CreateAPIKey(ctx, "plain", "")
	if err != nil {
		t.Fatal(err)
	}
	if made.Workspace == "default" {
		t.Errorf("a key made without a workspace acts in the administrator's")
	}
	k, err := client.New(s.url, made.Key)
	if err != nil {
		t.Fatal(err)
	}
	kk := keyed{Client: k, url: s.url, key: made.Key}
	if status, body := kk.raw(t, http.MethodGet, "/v1/sandboxes/"+mine.ID, ""); status != http.StatusNotFound {
		t.Errorf("the new key reading the administrator's sandbox: %d %s, want 404", status, body)
	}
	if status, body := kk.raw(t, http.MethodGet, "/v1/secrets", ""); status != http.StatusOK || strings.Contains(body, "ADMIN_TOKEN") {
		t.Errorf("the new key listing secrets: %d %s", status, body)
	}
	status, body := s.admin().raw(t, http.MethodPost, "/v1/keys", `{"name":"sneaky","workspace":"default"}`)
	if status != http.StatusForbidden || !strings.Contains(body, "administrator's") {
		t.Errorf("a key in the administrator's workspace: %d %s, want 403", status, body)
	}
}

// Finding 16 (MCP): a handler, with its sessions, was made for every
// Hutch-User a key sent, and never freed: one key could grow the daemon's
// memory without bound. Handlers are per key; the user is the session's.
func TestAttackMCPHandlersPerUser(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	h, err := s.mcpHandler()
	if err != nil {
		t.Fatal(err)
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for i := range 50 {
		r := httptest.NewRequest(http.MethodPost, mcpPath, strings.NewReader(initialize))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r = r.WithContext(withCaller(r.Context(), caller{key: "app", workspace: "acme", user: fmt.Sprintf("user-%d", i)}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || w.Header().Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize as user-%d: %d %s", i, w.Code, w.Body)
		}
	}
	if n := h.(*mcpHandlers).keys(); n != 1 {
		t.Errorf("one key naming 50 users has %d MCP handlers, want 1", n)
	}
}

// Finding 16 (key names): key names were one namespace for every
// workspace, so a key making keys learned from "already exists" which
// names other workspaces' keys had. A workspace's keys are named in its
// own namespace.
func TestAttackKeyNamesAcrossWorkspaces(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ctx := t.Context()
	a, b := s.keyIn(t, "a-app", "ws-a"), s.keyIn(t, "b-app", "ws-b")
	if _, err := a.CreateAPIKey(ctx, "ci", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.CreateAPIKeyWith(ctx, client.CreateAPIKeyRequest{Name: "deploy", Workspace: "ws-a"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ci", "deploy"} {
		made, err := b.CreateAPIKey(ctx, name, "")
		if err != nil {
			t.Errorf("workspace ws-b making key %s, a name ws-a has: %v", name, err)
			continue
		}
		if made.Name != name || made.Workspace != "ws-b" {
			t.Errorf("ws-b's key %s: %+v", name, made)
		}
	}
	list, err := b.ListAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range list {
		names = append(names, k.Name)
	}
	if strings.Join(names, ",") != "b-app,ci,deploy" {
		t.Errorf("ws-b's keys: %q, want b-app, ci and deploy, plain", names)
	}
	if err := b.DeleteAPIKey(ctx, "ci"); err != nil {
		t.Errorf("ws-b deleting its key ci: %v", err)
	}
	if list, err := a.ListAPIKeys(ctx); err != nil || len(list) != 3 {
		t.Errorf("ws-a's keys after ws-b deleted its ci: %+v, %v", list, err)
	}
}
