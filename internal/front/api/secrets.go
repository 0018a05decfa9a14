package api

import (
	"context"
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

// Secrets: a workspace's keys set, list and remove its secrets, and the
// personal ones of its users; values go in and never come out (a listing
// shows names, scope, description and times). The daemon's own key sees
// every workspace's, and alone rotates the master key.

// Secrets keeps secrets (internal/trust/secrets's Vault).
type Secrets interface {
	Set(ctx context.Context, req secrets.SetRequest) (secrets.Info, error)
	List(ctx context.Context, workspace, user string) ([]secrets.Info, error)
	ListAll(ctx context.Context, workspace string) ([]secrets.Info, error)
	Delete(ctx context.Context, workspace, user, name string) error
	RotateMaster(ctx context.Context) error
}

func secretJSON(i secrets.Info) client.Secret {
	return client.Secret{
		Name: i.Name, Workspace: i.Workspace, Scope: i.Scope, User: i.User, Description: i.Description,
		Inject: i.Inject, Hosts: i.Hosts, Query: i.Query, Placeholder: i.Placeholder, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt,
	}
}

// secretUser is the user whose personal secret a call names: for scope
// user, the body's or query's user, or the caller's (Hutch-User); for
// scope workspace (the default) none.
func secretUser(c caller, scope, user string) (string, error) {
	switch scope {
	case "", secrets.ScopeWorkspace:
		if user != "" {
			return "", errdefs.InvalidArgument("user %q is for scope user; a workspace secret has none", user)
		}
		return "", nil
	case secrets.ScopeUser:
		u, err := callUser(c, user)
		if err == nil && u == "" {
			err = errdefs.InvalidArgument("scope user needs the user: give user, or the %s header", headerUser)
		}
		return u, err
	}
	return "", errdefs.InvalidArgument("scope must be workspace or user, got %q", scope)
}

func (s *Server) setSecret(w http.ResponseWriter, r *http.Request) {
	var req client.SetSecretRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	user, err := secretUser(c, req.Scope, req.User)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	noteObject(r, req.Name)
	info, err := s.secrets.Set(r.Context(), secrets.SetRequest{
		Workspace: c.workspace, User: user, Name: req.Name, Description: req.Description,
		Value: []byte(req.Value), Inject: req.Inject, Hosts: req.Hosts, Query: req.Query,
	})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, secretJSON(info))
}

// listSecrets lists a key's workspace's secrets and its user's personal
// ones; the administrator's, every workspace's (or ?workspace=).
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	var list []secrets.Info
	var err error
	if c.admin {
		list, err = s.secrets.ListAll(r.Context(), c.filter(r))
	} else {
		list, err = s.secrets.List(r.Context(), c.workspace, c.user)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := client.Secrets{Secrets: []client.Secret{}}
	for _, i := range list {
		out.Secrets = append(out.Secrets, secretJSON(i))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	q := r.URL.Query()
	user, err := secretUser(c, q.Get("scope"), q.Get("user"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.secrets.Delete(r.Context(), c.workspace, user, r.PathValue("name")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rotateMaster(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r, "rotate the master key"); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.secrets.RotateMaster(r.Context()); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
