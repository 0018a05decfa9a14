package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/core/toolrun"
	"github.com/hutchdev/hutch/internal/front/mcpserver"
)

// mcpHandler serves the MCP tools at /mcp, over streamable HTTP, acting on
// the Manager and the tools service directly. Requests need the API key as every route does.
// A session acts as the caller that opened it: in its workspace, for its
// user, its tool calls in the sandbox mode of its key. Each key (in each
// workspace the administrator acts in) has sessions of its own, so that a
// session's id presented with another key finds no session. The user is
// not part of that: a key names whichever user it likes (Hutch-User), so
// a handler per user would guard nothing and grow with every name sent.
// A session unused for mcpSessionIdle is closed.
func (s *Server) mcpHandler() (http.Handler, error) {
	if _, err := mcpserver.New(managerSandboxes{s: s}, s.version); err != nil {
		return nil, err // the catalogue's schemas, checked once
	}
	return &mcpHandlers{s: s, byKey: map[caller]http.Handler{}}, nil
}

// mcpHandlers are the MCP handlers of each key (see mcpHandler).
type mcpHandlers struct {
	s     *Server
	mu    sync.Mutex
	byKey map[caller]http.Handler
}

func (m *mcpHandlers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := callerOf(r.Context())
	key.user = ""
	m.mu.Lock()
	h, ok := m.byKey[key]
	if !ok {
		h = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
			c := callerOf(r.Context()) // the request opening the session
			mode, _ := toolMode(r.Context(), "")
			srv, _ := mcpserver.New(managerSandboxes{s: m.s, mode: mode, c: c}, m.s.version) // checked in mcpHandler
			return srv
		}, &mcp.StreamableHTTPOptions{Logger: m.s.log, SessionTimeout: mcpSessionIdle})
		m.byKey[key] = h
	}
	m.mu.Unlock()
	h.ServeHTTP(w, r)
}

// keys is how many keys have handlers.
func (m *mcpHandlers) keys() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey)
}

// mcpSessionIdle is how long an MCP session may go unused: an agent's
// client keeps it for a conversation, and one that left frees it.
const mcpSessionIdle = 30 * time.Minute

// managerSandboxes is mcpserver.Sandboxes on the Manager, its tool calls
// on the tools service, answering as the REST API does, for caller c: its
// tool calls run in mode ("": the daemon's).
type managerSandboxes struct {
	s    *Server
	mode string
	c    caller
}

func (a managerSandboxes) CreateSandbox(ctx context.Context, req client.CreateSandboxRequest) (*client.Sandbox, error) {
	tmpl := req.Template
	if tmpl != "" {
		var err error
		if tmpl, err = a.s.templateRef(ctx, a.c, tmpl); err != nil {
			return nil, asClientError(err)
		}
	}
	sb, _, err := a.s.m.Create(ctx, create.Options{
		Workspace: a.c.workspace, User: a.c.user, NetworkCeiling: a.c.networkMode,
		Template: tmpl, Key: req.Key, IdleTimeout: time.Duration(req.IdleTimeoutS) * time.Second, Checkpoints: req.Checkpoints,
	})
	if err != nil {
		return nil, asClientError(err)
	}
	out := sandboxJSON(a.c, sb)
	return &out, nil
}

func (a managerSandboxes) ListSandboxes(ctx context.Context) ([]client.Sandbox, error) {
	list, err := a.s.m.List(ctx)
	if err != nil {
		return nil, asClientError(err)
	}
	out := []client.Sandbox{}
	for _, sb := range list {
		if a.c.sees(sb.Workspace) {
			out = append(out, sandboxJSON(a.c, sb))
		}
	}
	return out, nil
}

// RunTool runs in a's mode: an MCP call names none.
func (a managerSandboxes) RunTool(ctx context.Context, id, name string, args any, _ ...client.ToolOption) (*client.ToolResult, error) {
	if err := a.s.mayReach(ctx, a.c, id); err != nil {
		return nil, asClientError(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	outcome, err := a.s.tools.RunTool(ctx, id, toolrun.Call{Name: name, Args: raw, Mode: a.mode, ForUser: a.c.user}, nil)
	if err != nil {
		return nil, asClientError(err)
	}
	res := toolResult(outcome)
	return &res, nil
}

// asClientError is err as the REST API would have answered it.
func asClientError(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce
	}
	status, _ := statusOf(err)
	d := describe(err)
	return &client.Error{StatusCode: status, Code: d.Code, Message: d.Message}
}
