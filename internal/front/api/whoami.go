package api

import (
	"cmp"
	"net/http"

	"github.com/hutchdev/hutch/client"
)

// whoami tells the caller who the daemon takes it for, and the defaults
// that apply to what it makes: what a console or an SDK shows before it
// asks for anything the key may not have.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	writeJSON(w, http.StatusOK, client.Whoami{
		Admin:       c.admin,
		Key:         c.key,
		Workspace:   c.workspace,
		User:        c.user,
		ToolsMode:   c.toolsMode,
		NetworkMode: string(c.networkMode),
		Defaults: client.Defaults{
			NetworkMode: cmp.Or(s.defaults.NetworkMode, "full"),
			ToolsMode:   cmp.Or(s.defaults.ToolsMode, "all"),
		},
	})
}
