package api

import (
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/apikeys"
)

// API keys: only the daemon's owner (its own key, or the unix socket)
// manages them.

func apiKeyJSON(k *apikeys.Key) client.APIKey {
	return client.APIKey{Name: k.Name, ToolsMode: k.ToolsMode, NetworkMode: k.NetworkMode, CreatedAt: k.CreatedAt}
}

func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req client.CreateAPIKeyRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	key, rec, err := s.keys.Create(r.Context(), req.Name, req.ToolsMode, req.NetworkMode)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := apiKeyJSON(rec)
	out.Key = key
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	keys, err := s.keys.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Keys []client.APIKey `json:"keys"`
	}{Keys: []client.APIKey{}}
	for _, k := range keys {
		out.Keys = append(out.Keys, apiKeyJSON(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteAPIKey(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.keys.Delete(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
