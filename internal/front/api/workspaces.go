package api

import (
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Workspaces: the administrator lists them and sets their quotas; a key
// reads its own workspace's usage.

func quotaJSON(q store.Quota) client.Quota { return client.Quota(q) }

func usageJSON(u quota.Usage) client.WorkspaceUsage {
	return client.WorkspaceUsage{
		Workspace: u.Workspace, Quota: quotaJSON(u.Quota), Sandboxes: u.Sandboxes, MemoryMB: u.MemoryMB,
		CPUs: u.CPUs, DiskMB: u.DiskMB, SandboxHours: u.SandboxHours, Day: u.Day,
	}
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	list, err := s.spaces.Workspaces(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := client.Workspaces{Workspaces: []client.Workspace{}}
	for _, ws := range list {
		if c.sees(ws.Name) {
			out.Workspaces = append(out.Workspaces, client.Workspace{Name: ws.Name, Quota: quotaJSON(ws.Quota), CreatedAt: ws.CreatedAt})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// workspaceNamed is the workspace of the path, which c may see.
func workspaceNamed(r *http.Request, c caller) (string, error) {
	ws := r.PathValue("w")
	if !c.sees(ws) {
		return "", errdefs.NotFound("workspace %s not found", ws)
	}
	return ws, nil
}

func (s *Server) workspaceUsage(w http.ResponseWriter, r *http.Request) {
	ws, err := workspaceNamed(r, callerOf(r.Context()))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	u, err := s.spaces.Usage(r.Context(), ws)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, usageJSON(u))
}

func (s *Server) setQuota(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	ws, err := workspaceNamed(r, c)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := ownerOnly(r, "set quotas"); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var q client.Quota
	if err := decode(r, &q); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.spaces.SetQuota(r.Context(), ws, store.Quota(q)); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	u, err := s.spaces.Usage(r.Context(), ws)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, usageJSON(u))
}
