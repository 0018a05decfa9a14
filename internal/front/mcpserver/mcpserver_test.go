package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent/tools"
)

// fakeSandboxes answers as the daemon would, and records tool calls.
type fakeSandboxes struct {
	calls []string // id name args
}

func (f *fakeSandboxes) CreateSandbox(_ context.Context, req client.CreateSandboxRequest) (*client.Sandbox, error) {
	return &client.Sandbox{ID: "sb1", State: client.StateRunning, Key: req.Key, Template: "host", Runtime: "runc"}, nil
}

func (f *fakeSandboxes) ListSandboxes(context.Context) ([]client.Sandbox, error) {
	return []client.Sandbox{{ID: "sb1", State: client.StateSuspended}}, nil
}

func (f *fakeSandboxes) RunTool(_ context.Context, id, name string, args any, _ ...client.ToolOption) (*client.ToolResult, error) {
	b, _ := json.Marshal(args)
	f.calls = append(f.calls, id+" "+name+" "+string(b))
	switch {
	case id == "gone":
		return nil, &client.Error{Code: client.CodeNotFound, Message: "sandbox gone not found"}
	case strings.Contains(string(b), "missing"):
		return &client.ToolResult{Status: client.ToolError, Error: &client.ToolFailure{Kind: tools.KindNotFound, Message: "missing: no such file"}}, nil
	}
	return &client.ToolResult{Status: client.ToolSuccess, Result: json.RawMessage(`{"ok":true}`)}, nil
}

func connect(t *testing.T, f *fakeSandboxes) *mcp.ClientSession {
	t.Helper()
	srv, err := New(f, "test")
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		texts = append(texts, c.(*mcp.TextContent).Text)
	}
	return strings.Join(texts, "\n"), res.IsError
}

func TestTools(t *testing.T) {
	f := &fakeSandboxes{}
	cs := connect(t, f)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == CreateTool || tool.Name == ListTool {
			continue
		}
		schema := tool.InputSchema.(map[string]any)
		required := schema["required"].([]any)
		if required[0] != "sandbox_id" || schema["properties"].(map[string]any)["sandbox_id"] == nil {
			t.Errorf("%s: schema %v does not require sandbox_id", tool.Name, schema)
		}
	}
	for _, want := range append([]string{CreateTool, ListTool}, tools.ReadFile, tools.ApplyPatch, tools.RunCommand) {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}

	if text, isErr := callText(t, cs, CreateTool, map[string]any{"key": "chat-1"}); isErr || !strings.Contains(text, `"sandbox_id":"sb1"`) || !strings.Contains(text, `"key":"chat-1"`) {
		t.Errorf("create: %q %v", text, isErr)
	}
	if text, isErr := callText(t, cs, ListTool, nil); isErr || !strings.Contains(text, `"state":"suspended"`) {
		t.Errorf("list: %q %v", text, isErr)
	}
	if text, isErr := callText(t, cs, tools.ReadFile, map[string]any{"sandbox_id": "sb1", "path": "a.txt"}); isErr || text != `{"ok":true}` {
		t.Errorf("read: %q %v", text, isErr)
	}
	if want := `sb1 sandbox_read_file {"path":"a.txt"}`; len(f.calls) != 1 || f.calls[0] != want {
		t.Errorf("calls %q, want %q: the sandbox_id goes, the rest is the tool's", f.calls, want)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "a.txt"}, "invalid_argument: sandbox_id is required"},
		{map[string]any{"sandbox_id": "sb1", "path": "missing"}, "not_found: missing: no such file"},
		{map[string]any{"sandbox_id": "gone", "path": "a.txt"}, "not_found: sandbox gone not found"},
	} {
		if text, isErr := callText(t, cs, tools.ReadFile, tc.args); !isErr || !strings.HasPrefix(text, tc.want) {
			t.Errorf("%v: %q (error %v), want an error starting %q", tc.args, text, isErr, tc.want)
		}
	}
}
