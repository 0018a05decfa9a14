package api

import (
	"net/http"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Every listener's first step (internal/app/daemon wraps each server's
// handler in CanonicalPaths): a request's path is decided on in one
// spelling. Routers that match on a path's text ("/execute",
// "/e2b/", "/v1/downloads/") and handlers that trim or clean it before
// routing on it again would otherwise disagree about one request: a
// check made on "/execute" and a route taken on "//execute" is how the
// E2B front ran code without its token (issue 36, finding 3). A path
// with an empty, "." or ".." segment is refused outright rather than
// cleaned: no browser or SDK sends one, so the only callers are those
// looking for such a disagreement. Encoded slashes are the handlers'
// matter: an app behind a preview may use them ("@scope%2fname"), and
// the API's own routes never take "/" inside a segment.

// CanonicalPaths refuses requests whose path is not canonical (see
// canonicalPath) with 400, and passes the rest to next.
func CanonicalPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := canonicalPath(r.URL.Path); err != nil {
			writeError(w, r, nil, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalPath says why p is not a canonical absolute path, or nil. A
// canonical path starts with "/" and has no empty segment but a final
// one ("/a/" is canonical, "/a//b" is not) and no "." or ".." segment.
// "*" is OPTIONS's path for the whole server; "" the root's, as an
// absolute URL without a path names it.
func canonicalPath(p string) error {
	if p == "*" || p == "" {
		return nil // the whole server's (OPTIONS), or the root's
	}
	if !strings.HasPrefix(p, "/") {
		return errdefs.InvalidArgument("path %q does not start with /", p)
	}
	// Segment by segment, without a slice: every request of every
	// listener comes through here.
	for rest := p[1:]; ; {
		seg, after, more := strings.Cut(rest, "/")
		switch {
		case seg == "" && more:
			return errdefs.InvalidArgument("path %q has an empty segment (//): send each path in its one plain spelling", p)
		case seg == "." || seg == "..":
			return errdefs.InvalidArgument("path %q has a %q segment: send each path in its one plain spelling", p, seg)
		case !more:
			return nil
		}
		rest = after
	}
}
