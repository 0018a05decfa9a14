package api

import (
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// API keys: the administrator makes keys in any workspace but its own; a key makes
// keys of its own workspace with no more than its own rights, and lists
// and removes its workspace's keys.

func apiKeyJSON(c caller, k *apikeys.Key) client.APIKey {
	return client.APIKey{Name: c.shown(k.Name), Workspace: k.Workspace, ToolsMode: k.ToolsMode, NetworkMode: k.NetworkMode, CreatedAt: k.CreatedAt}
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) {
	var req client.CreateAPIKeyRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	if req.Workspace == "" && (!c.admin || c.workspace != workspace.Default) {
		// A key's own workspace, or the one the administrator acts in;
		// the administrator's own is no key's (apikeys.Create makes a
		// new one).
		req.Workspace = c.workspace
	}
	if !c.admin {
		if err := c.mayMakeKey(req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		req.ToolsMode, req.NetworkMode = orValue(req.ToolsMode, c.toolsMode), orValue(req.NetworkMode, string(c.networkMode))
	}
	// A key's keys are named in its workspace's own namespace: a name
	// taken in another workspace is not "already exists" to it.
	key, rec, err := s.keys.Create(r.Context(), apikeys.CreateRequest{Name: req.Name, Workspace: req.Workspace, ToolsMode: req.ToolsMode, NetworkMode: req.NetworkMode, Own: !c.admin})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := apiKeyJSON(c, rec)
	out.Key = key
	writeJSON(w, http.StatusCreated, out)
}

// mayMakeKey says why key c may not make the key req asks for: one of
// another workspace (which it does not see: not found), or with more
// rights than its own.
func (c caller) mayMakeKey(req client.CreateAPIKeyRequest) error {
	switch {
	case req.Workspace != c.workspace:
		return errdefs.NotFound("workspace %s not found: key %s makes keys of its own workspace (%s) only", req.Workspace, c.key, c.workspace)
	case req.ToolsMode != "" && tools.ValidMode(req.ToolsMode) && !tools.ModeAllows(c.toolsMode, req.ToolsMode):
		return errdefs.PermissionDenied("key %s may not make a key of tools mode %s: its own is %s", c.key, req.ToolsMode, c.toolsMode)
	case req.NetworkMode != "" && !netpolicy.Mode(req.NetworkMode).AtMost(c.networkMode):
		return errdefs.PermissionDenied("key %s may not make a key of network mode %s: its own is %s", c.key, req.NetworkMode, c.networkMode)
	}
	return nil
}

func orValue(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	keys, err := s.keys.List(r.Context(), c.filter(r))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Keys []client.APIKey `json:"keys"`
	}{Keys: []client.APIKey{}}
	for _, k := range keys {
		out.Keys = append(out.Keys, apiKeyJSON(c, k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteAPIKey(w http.ResponseWriter, r *http.Request) {
	ws := ""
	if c := callerOf(r.Context()); !c.admin {
		ws = c.workspace
	}
	if err := s.keys.Delete(r.Context(), ws, r.PathValue("name")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
