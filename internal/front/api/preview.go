package api

import (
	"context"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/preview"
)

// Previews: a port of a sandbox, reached by path at
// /v1/sandboxes/{id}/ports/{port}/… (path routing) or by host at
// {port}-{id}.{preview domain} (host routing), with every method and
// upgrade (internal/front/preview carries them). A preview answers only to its
// sandbox's workspace: a key of it, as every route (another workspace's
// key finds no sandbox: 404), or a request PreviewAccess lets through.
//
// A path-routed preview is on the API's own origin, the console's: the
// proxy (internal/front/preview) answers it sandboxed in an opaque origin (CSP
// sandbox, never allow-same-origin), without Service-Worker-Allowed, and
// refuses it a service worker's script (403 permission_denied), so that
// no page of a sandbox's reads the console's key or sees its requests.
// Host routing gives each preview an origin of its own. Whichever way a
// request comes, Hutch's credentials stay on this side: the key (as
// Authorization, X-Api-Key or a hutch.bearer.* subprotocol), the links'
// cookies, Hutch-* headers.
//
// Preview requests are not in the audit log: a page's every asset would
// be an entry, and they change nothing of Hutch's. Nor are their bodies
// redacted as the API's answers are: they are the sandbox's own server's,
// passed on as they come (WebSocket frames too, which the redaction of
// answers could not follow).

// previewPattern is path routing's, for every method.
const previewPattern = "/v1/sandboxes/{id}/ports/{port}/{path...}"

// previewPrefixSegments is how many segments of a path routing path name
// the sandbox and port: v1, sandboxes, {id}, ports, {port}.
const previewPrefixSegments = 5

// PreviewAccess decides about a preview request that carries no API key
// of the daemon's (or one it does not know: it may be the app's own): a
// signed preview link's cookie, or a public service, may let it reach port
// t.Port of sandbox t.Sandbox. It checks the sandbox's workspace itself.
// It returns nil to let r through; an error to answer r with
// (errdefs.Unauthenticated: 401); or handled when it answered r itself (a
// link that sets its cookie and redirects). A nil PreviewAccess lets only
// keys through.
type PreviewAccess func(w http.ResponseWriter, r *http.Request, t preview.Target) (handled bool, err error)

// previewByPath serves path routing.
func (s *Server) previewByPath(requireKey bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		port, err := strconv.Atoi(r.PathValue("port"))
		if err != nil || port < 1 || port > 65535 {
			writeError(w, r, s.log, errdefs.InvalidArgument("port must be a number from 1 to 65535, got %q", r.PathValue("port")))
			return
		}
		t := preview.Target{Sandbox: r.PathValue("id"), Port: port, Prefix: pathPrefix(r.URL.EscapedPath(), previewPrefixSegments)}
		s.servePreview(w, r, t, requireKey)
	}
}

// previewHosts sends the requests whose Host names a preview (host
// routing) to it, and the others to next.
func (s *Server) previewHosts(next http.Handler, requireKey bool) http.Handler {
	if s.previews == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t, ok := s.previews.Route(r.Host); ok {
			s.servePreview(w, r, t, requireKey)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// servePreview lets a preview request through to t, if its caller may
// reach it.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, t preview.Target, requireKey bool) {
	c := callerOf(r.Context())
	if c.anonymous {
		if s.access == nil {
			s.writeUnauthenticated(w, r, errUnauthenticated)
			return
		}
		handled, err := s.access(w, r, t)
		if handled {
			return
		}
		if err != nil {
			s.writeUnauthenticated(w, r, err)
			return
		}
	} else {
		if err := s.mayReach(r.Context(), c, t.Sandbox); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		t.StripAuthorization = requireKey // it carried the key
	}
	if s.previews == nil {
		writeError(w, r, s.log, errdefs.NotImplemented("previews are off in this daemon"))
		return
	}
	t.Starting = s.serviceStarting(t.Sandbox, t.Port)
	if err := s.previews.Serve(w, r, t); err != nil && r.Context().Err() == nil {
		writeError(w, r, s.log, err)
	}
}

// serviceStarting is a preview's Target.Starting: whether a service of
// sandbox id on port is starting, so that a request its port refuses
// waits for it (a pane that reloads after Restart Service). Looking does
// not wake the sandbox. A look that fails says no: the request is
// answered at once, as when no service is on the port.
func (s *Server) serviceStarting(id string, port int) func(context.Context) bool {
	return func(ctx context.Context) bool { return s.execs.PortStarting(ctx, id, port) }
}

// writeUnauthenticated is writeError, with the challenge of a 401.
func (s *Server) writeUnauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	if errdefs.Kind(err) == errdefs.ErrUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hutch"`)
	}
	writeError(w, r, s.log, err)
}

// isPreview says whether r is a preview request, by host or by path: one
// that may come without a key of the daemon's (see PreviewAccess).
func (s *Server) isPreview(r *http.Request) bool {
	if s.previews == nil {
		return false
	}
	if _, ok := s.previews.Route(r.Host); ok {
		return true
	}
	p := r.URL.Path
	parts := strings.SplitN(p, "/", previewPrefixSegments+2)
	return len(parts) > previewPrefixSegments && parts[1] == "v1" && parts[2] == "sandboxes" && parts[4] == "ports" &&
		path.Clean(p) == strings.TrimSuffix(p, "/")
}

// pathPrefix is the first n segments of escaped path p ("/a/b" for n 2 of
// "/a/b/c"), or p when it has no more.
func pathPrefix(p string, n int) string {
	i := 0
	for range n {
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			return p
		}
		i += 1 + j
	}
	return p[:i]
}
