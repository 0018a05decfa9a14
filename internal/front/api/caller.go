package api

import (
	"cmp"
	"context"
	"crypto/subtle"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/hutchdev/hutch/console"
	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Who calls, and what they may see. Every request has a caller: the
// administrator (the daemon's own key, or its root-only unix socket), a
// key of `hutch key create`, which acts in its workspace, or nobody (a
// download URL, which its signed token allows). A key sees only its
// workspace's objects: another workspace's is not found (404, never 403),
// so that ids and names say nothing of other workspaces. The checks are
// made in one place per kind of object: guard, for every route that names
// a sandbox; the name mappings below, for volumes and templates; the
// services, for keys and secrets, which they keep by workspace.

// Headers a caller may send.
const (
	// headerUser names the product's user a call is for: whose personal
	// secrets it gets, recorded in the audit log.
	headerUser = "Hutch-User"
	// headerWorkspace names the workspace the administrator acts in
	// (default: workspace.Default).
	headerWorkspace = "Hutch-Workspace"
)

// caller is who made a request.
type caller struct {
	// admin: the daemon's own key or its unix socket; sees every
	// workspace.
	admin bool
	// anonymous: no key at all (a download URL).
	anonymous bool
	// key is the API key's name ("" for the administrator).
	key string
	// workspace is the workspace it acts in: what it makes belongs there.
	workspace string
	// user is the product's user the call is for ("" when not named).
	user string
	// toolsMode is the least isolated sandbox mode its tool calls may
	// use ("" for the administrator: any).
	toolsMode string
	// networkMode is the least isolated network mode its sandboxes may
	// ask for ("" for the administrator: any).
	networkMode netpolicy.Mode
}

type callerKey struct{}

// callerOf returns the request's caller. A context without one (which
// identify never lets through) is a caller who sees nothing.
func callerOf(ctx context.Context) caller {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok {
		return caller{anonymous: true}
	}
	return c
}

func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// identify finds each request's caller. With requireKey every request but
// a download must carry a key (TCP); without, the caller is the
// administrator (the root-only unix socket).
func (s *Server) identify(next http.Handler, requireKey bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.callerFor(r, requireKey)
		if err != nil {
			s.writeUnauthenticated(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), c)))
	})
}

// Browsers cannot set headers on a WebSocket: they offer the key as a
// subprotocol, wsBearerPrefix and the key, beside wsProtocol, which the
// daemon picks (a browser drops a session whose answer picks none of those
// it offered). Kubernetes does the same for its API.
const (
	wsProtocol     = "hutch.v1"
	wsBearerPrefix = "hutch.bearer."
)

// presentedKey is the key r presents: its Authorization header's bearer token,
// or for a WebSocket without one, the key it offers as a subprotocol.
func presentedKey(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		return strings.CutPrefix(h, "Bearer ")
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "", false
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if key, ok := strings.CutPrefix(strings.TrimSpace(p), wsBearerPrefix); ok {
				return key, true
			}
		}
	}
	return "", false
}

// callerFor is the caller of r, with the headers it sent checked.
func (s *Server) callerFor(r *http.Request, requireKey bool) (caller, error) {
	c := caller{admin: true, workspace: workspace.Default}
	if requireKey {
		token, ok := presentedKey(r)
		switch {
		case ok && subtle.ConstantTimeCompare([]byte(token), []byte(s.key)) == 1:
			// the daemon's own key: the administrator
		case ok:
			k, err := s.keys.Lookup(r.Context(), token)
			if err != nil {
				if s.isPreview(r) {
					return caller{anonymous: true}, nil // the app's own token, maybe: see PreviewAccess
				}
				return caller{}, errUnauthenticated
			}
			c = caller{key: k.Name, workspace: k.Workspace, toolsMode: k.ToolsMode, networkMode: netpolicy.Mode(k.NetworkMode)}
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/downloads/") && path.Clean(r.URL.Path) == r.URL.Path:
			return caller{anonymous: true}, nil // its signed token allows it
		case s.isPreview(r):
			return caller{anonymous: true}, nil // see PreviewAccess
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && console.Serves(r.URL.Path):
			return caller{anonymous: true}, nil // the console's page and files hold no data
		default:
			return caller{}, errUnauthenticated
		}
	}
	if u := r.Header.Get(headerUser); u != "" {
		if err := workspace.CheckUser(u); err != nil {
			return caller{}, errdefs.Prefix(err, "header %s", headerUser)
		}
		c.user = u
	}
	if ws := r.Header.Get(headerWorkspace); ws != "" && ws != c.workspace {
		if !c.admin {
			return caller{}, errdefs.PermissionDenied("key %s acts in workspace %s only; drop the %s header", c.key, c.workspace, headerWorkspace)
		}
		if err := workspace.Check(ws); err != nil {
			return caller{}, errdefs.Prefix(err, "header %s", headerWorkspace)
		}
		c.workspace = ws
	}
	return c, nil
}

var errUnauthenticated = errdefs.Unauthenticated(
	"missing or wrong API key: send 'Authorization: Bearer <key>' (the daemon's own key is in its data dir, api.key)")

// who names c in what it did (an event's "deleted by …").
func (c caller) who() string {
	switch {
	case c.admin:
		return "the administrator"
	case c.anonymous:
		return "a signed link"
	}
	return "key " + c.key
}

// sees says whether c may see an object of workspace ws.
func (c caller) sees(ws string) bool {
	return c.admin || !c.anonymous && ws == c.workspace
}

// filter is the workspace a listing shows: the caller's own, or for the
// administrator the ?workspace= asked for ("": all).
func (c caller) filter(r *http.Request) string {
	if c.admin {
		return r.URL.Query().Get("workspace")
	}
	return c.workspace
}

// guard is a route's handler behind the limits (see limits.go; the
// rate and streams of keys when limited) and the check of the sandbox it
// names, if it names one ({id}): a sandbox the caller may not see is not
// found. Every route goes through it (see Handler), through the audit
// log, and into the metrics.
func (s *Server) guard(rt route, limited bool) http.HandlerFunc {
	namesSandbox := strings.Contains(rt.pattern, "{id}")
	recorded := audited(rt.pattern)
	return func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		c := callerOf(r.Context())
		r, span := startSpan(r, rt.pattern, c)
		defer span.End()
		done, err := s.limit(w, r, rt, c, limited)
		rec, r := s.auditing(w, r, rt.pattern, recorded, c)
		defer rec.done()
		defer func() {
			status := cmp.Or(rec.status, http.StatusOK)
			endSpan(span, status, rec.code)
			if s.metrics != nil {
				s.metrics.Request(rt.pattern, status, rec.code, time.Since(began))
			}
		}()
		if err != nil {
			writeError(rec, r, s.log, err)
			return
		}
		defer done()
		if namesSandbox {
			p, err := s.reach(r.Context(), c, r.PathValue("id"))
			if err == nil && rt.pattern != "GET /v1/sandboxes/{id}" {
				// Among nodes, only the one holding it acts on it; its
				// record any node can tell.
				err = p.Held()
			}
			if err != nil {
				writeError(rec, r, s.log, err)
				return
			}
		}
		rt.handler(rec, r)
	}
}

// mayReach says whether c may see sandbox id: not found otherwise, as for
// a sandbox that does not exist.
func (s *Server) mayReach(ctx context.Context, c caller, id string) error {
	_, err := s.reach(ctx, c, id)
	return err
}

// reach is where sandbox id is, if c may see it (see mayReach).
func (s *Server) reach(ctx context.Context, c caller, id string) (core.Place, error) {
	p, err := s.m.Locate(ctx, id)
	if err != nil {
		return core.Place{}, err
	}
	if !c.sees(p.Workspace) {
		return core.Place{}, errdefs.NotFound("sandbox %s not found", id)
	}
	return p, nil
}

// ownerOnly refuses callers other than the administrator.
func ownerOnly(r *http.Request, what string) error {
	if c := callerOf(r.Context()); !c.admin {
		return errdefs.PermissionDenied("key %s may not %s: use the daemon's own key (api.key)", c.key, what)
	}
	return nil
}

// toolMode is the sandbox mode of a tool call that asks for mode (""
// for the default) from the request's caller: a key's mode when it asks
// for none, and never a less isolated one than its key allows.
func toolMode(ctx context.Context, mode string) (string, error) {
	c := callerOf(ctx)
	switch {
	case c.admin:
		return mode, nil
	case mode == "":
		return c.toolsMode, nil
	case tools.ValidMode(mode) && !tools.ModeAllows(c.toolsMode, mode):
		return "", errdefs.PermissionDenied("key %s may not use sandbox mode %s: its tool calls run in mode %s or a more isolated one", c.key, mode, c.toolsMode)
	}
	return mode, nil
}

// Volumes and templates live in one namespace of names, where a
// workspace's own are qualified (internal/trust/workspace). What callers give
// and read are their plain names.

// volumeName is the stored name of the volume a caller names.
func (c caller) volumeName(name string) (string, error) {
	if workspace.Qualified(name) {
		if c.admin {
			return name, nil // the administrator names any workspace's
		}
		return "", errdefs.NotFound("volume %s not found", name)
	}
	return workspace.Volume(name, c.workspace), nil
}

// shown is the name a caller reads of a stored volume or template name:
// plain for its workspace's and unqualified ones (the only ones a key
// sees), qualified for the others the administrator sees.
func (c caller) shown(stored string) string {
	if name, ws := workspace.Split(stored); ws == c.workspace {
		return name
	}
	return stored
}

// seesTemplate says whether c may see the template stored as stored:
// shared ones (no qualifier) everyone may.
func (c caller) seesTemplate(stored string) bool {
	_, ws := workspace.Split(stored)
	return ws == "" || c.sees(ws)
}
