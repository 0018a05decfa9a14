// Package mcpserver offers Hutch's sandbox tools over the Model Context
// Protocol, with the official Go SDK: every tool of the catalogue (package
// tools), each taking the sandbox_id it acts in, and sandbox_create and
// sandbox_list to get one. `hutch mcp` serves it on stdio, talking to the
// daemon through the Go client; the daemon serves it at /mcp (streamable
// HTTP) on its own Manager.
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent/tools"
)

// Sandboxes is what the server needs of Hutch. *client.Client has it; the
// daemon adapts its Manager.
type Sandboxes interface {
	CreateSandbox(ctx context.Context, req client.CreateSandboxRequest) (*client.Sandbox, error)
	ListSandboxes(ctx context.Context) ([]client.Sandbox, error)
	RunTool(ctx context.Context, id, name string, args any, opts ...client.ToolOption) (*client.ToolResult, error)
}

// Names of the tools only MCP has.
const (
	CreateTool = "sandbox_create"
	ListTool   = "sandbox_list"
)

// New returns an MCP server of Hutch's tools acting through s.
func New(s Sandboxes, version string) (*mcp.Server, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hutch", Title: "Hutch sandboxes", Version: version}, nil)
	srv.AddTool(&mcp.Tool{
		Name: CreateTool,
		Description: "Create a sandbox: an isolated Linux machine to run commands and keep files in, " +
			"and return its sandbox_id, which every other tool takes. With a key, the sandbox with " +
			"that key is returned if there is one (woken if it was suspended), so that one " +
			"conversation keeps one sandbox.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "key": {"type": "string", "description": "Get or create: the sandbox with this key if there is one."},
    "template": {"type": "string", "description": "Template to start from (default: the daemon's)."},
    "idle_timeout_s": {"type": "integer", "minimum": 1, "description": "Seconds without use before it is suspended (default 300)."},
    "checkpoints": {"type": "string", "enum": ["per_tool_call"], "description": "per_tool_call: a checkpoint before each tool call that changes files, named in its result as undo_checkpoint, so that sandbox_rollback can undo that call."}
  },
  "additionalProperties": false
}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Key          string `json:"key"`
			Template     string `json:"template"`
			IdleTimeoutS int64  `json:"idle_timeout_s"`
			Checkpoints  string `json:"checkpoints"`
		}
		if err := decodeArgs(req.Params.Arguments, &a); err != nil {
			return failure(tools.KindInvalidArgument, err.Error(), nil), nil
		}
		sb, err := s.CreateSandbox(ctx, client.CreateSandboxRequest{Key: a.Key, Template: a.Template, IdleTimeoutS: a.IdleTimeoutS, Checkpoints: a.Checkpoints})
		if err != nil {
			return callFailure(err), nil
		}
		return success(summary(*sb))
	})
	srv.AddTool(&mcp.Tool{
		Name:        ListTool,
		Description: "List the sandboxes there are, with their sandbox_id, state, template and key.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`),
	}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		list, err := s.ListSandboxes(ctx)
		if err != nil {
			return callFailure(err), nil
		}
		out := []sandboxSummary{}
		for _, sb := range list {
			out = append(out, summary(sb))
		}
		return success(struct {
			Sandboxes []sandboxSummary `json:"sandboxes"`
		}{out})
	})
	for _, t := range tools.Catalogue {
		schema, err := withSandboxID(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		srv.AddTool(&mcp.Tool{
			Name:        t.Name,
			Description: t.Description + " Give the sandbox_id from sandbox_create or sandbox_list.",
			InputSchema: schema,
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]json.RawMessage
			if err := decodeArgs(req.Params.Arguments, &args); err != nil {
				return failure(tools.KindInvalidArgument, err.Error(), nil), nil
			}
			var id string
			if err := json.Unmarshal(args["sandbox_id"], &id); err != nil || id == "" {
				return failure(tools.KindInvalidArgument, "sandbox_id is required: create a sandbox with sandbox_create", nil), nil
			}
			delete(args, "sandbox_id")
			res, err := s.RunTool(ctx, id, t.Name, args)
			if err != nil {
				return callFailure(err), nil
			}
			var out *mcp.CallToolResult
			if res.Error != nil {
				out = failure(res.Error.Kind, res.Error.Message, res.Result)
			} else {
				out = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(res.Result)}}}
			}
			for _, img := range res.Images {
				out.Content = append(out.Content, &mcp.ImageContent{MIMEType: img.MIMEType, Data: img.Data})
			}
			return out, nil
		})
	}
	return srv, nil
}

// withSandboxID adds a required sandbox_id to a tool's argument schema.
func withSandboxID(schema json.RawMessage) (json.RawMessage, error) {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("its schema is not JSON: %w", err)
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props["sandbox_id"] = map[string]any{"type": "string", "description": "The sandbox to act in (from sandbox_create or sandbox_list)."}
	s["properties"] = props
	required, _ := s["required"].([]any)
	s["required"] = append([]any{"sandbox_id"}, required...)
	return json.Marshal(s)
}

func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("arguments: %v", err)
	}
	return nil
}

// sandboxSummary is a sandbox as the MCP tools describe it.
type sandboxSummary struct {
	SandboxID string    `json:"sandbox_id"`
	State     string    `json:"state"`
	Template  string    `json:"template"`
	Runtime   string    `json:"runtime"`
	Key       string    `json:"key,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func summary(sb client.Sandbox) sandboxSummary {
	return sandboxSummary{SandboxID: sb.ID, State: sb.State, Template: sb.Template, Runtime: sb.Runtime, Key: sb.Key, CreatedAt: sb.CreatedAt}
}

func success(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
}

// failure is a tool call that failed: the kind and message first, then the
// result there is (a failed command's output).
func failure(kind, message string, result json.RawMessage) *mcp.CallToolResult {
	content := []mcp.Content{&mcp.TextContent{Text: kind + ": " + message}}
	if len(result) > 0 {
		content = append(content, &mcp.TextContent{Text: string(result)})
	}
	return &mcp.CallToolResult{IsError: true, Content: content}
}

// callFailure is a failure of the call itself (no such sandbox), told to
// the model as a tool failure it can act on.
func callFailure(err error) *mcp.CallToolResult {
	kind := tools.KindFailed
	switch {
	case client.IsNotFound(err):
		kind = tools.KindNotFound
	case client.IsInvalidArgument(err):
		kind = tools.KindInvalidArgument
	}
	return failure(kind, err.Error(), nil)
}
