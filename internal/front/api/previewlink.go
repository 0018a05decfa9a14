package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/front/preview"
)

// Preview links and public services: what lets a request without the
// API key reach a preview (the Server's PreviewAccess).
//
// A link (POST …/services/{name}/link) is the preview's URL with a signed,
// expiring token in its query, for one service of one sandbox, on its
// port, with the time it was made: DELETE …/services/{name}/link revokes
// every link of the service made until then. Its first
// visit sets the token as an HttpOnly, SameSite=Lax cookie scoped to that
// preview (its host with host routing, its path prefix with path routing)
// and redirects to the clean URL; later requests carry the cookie, which
// the proxy strips with every hutch_ cookie before the request reaches the
// sandbox. The cookie is Secure whenever the daemon is reached over HTTPS,
// its own TLS or a proxy's in front of it (PublicURL https://…). A
// service started public answers anyone.
//
// A page that frames a host-routed preview (the console's preview pane) is
// another site than the preview's host, and a browser neither keeps nor
// sends a Lax cookie in a cross-site frame. The first visit of such a
// preview therefore also sets hutch_preview_embed: SameSite=None, Secure
// (which Chromium accepts over plain HTTP on localhost names) and
// Partitioned, so that it is kept apart for each site that frames the
// preview and no other site's page can use it.

const (
	previewTokenParam = "hutch_preview_token"
	previewCookie     = "hutch_preview"
	embedCookie       = "hutch_preview_embed"
	defaultLinkTTL    = time.Hour
	maxLinkTTL        = 7 * 24 * time.Hour
)

// previewAccess is the Server's PreviewAccess.
func (s *Server) previewAccess(w http.ResponseWriter, r *http.Request, t preview.Target) (bool, error) {
	if public, err := s.execs.PublicPort(r.Context(), t.Sandbox, t.Port); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return false, err
	} else if public {
		return false, nil
	}
	if s.links == nil {
		return false, errPrivatePreview
	}
	if tok := r.URL.Query().Get(previewTokenParam); tok != "" {
		claim, err := s.checkLink(r.Context(), tok, t)
		if err != nil {
			return false, err
		}
		http.SetCookie(w, &http.Cookie{
			Name: previewCookie, Value: tok, Path: cookiePath(t), Expires: time.Unix(claim.Expires, 0),
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.servesHTTPS(r),
		})
		if t.Prefix == "" && (s.servesHTTPS(r) || isLocalhost(r.Host)) {
			http.SetCookie(w, &http.Cookie{
				Name: embedCookie, Value: tok, Path: "/", Expires: time.Unix(claim.Expires, 0),
				HttpOnly: true, SameSite: http.SameSiteNoneMode, Secure: true, Partitioned: true,
			})
		}
		clean := *r.URL
		q := clean.Query()
		q.Del(previewTokenParam)
		clean.RawQuery = q.Encode()
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, clean.RequestURI(), http.StatusSeeOther)
		return true, nil
	}
	return false, s.checkLinkCookies(r, t)
}

// checkLinkCookies lets r through when one of its link cookies is a link
// to t. Every cookie of those names is checked, not only the first: a
// page of another preview may set one of the same name for a wider path
// or a parent domain (cookie tossing), which a browser may send first.
func (s *Server) checkLinkCookies(r *http.Request, t preview.Target) error {
	refused := errPrivatePreview
	for _, c := range r.Cookies() {
		if c.Name != previewCookie && c.Name != embedCookie {
			continue
		}
		_, err := s.checkLink(r.Context(), c.Value, t)
		if err == nil {
			return nil
		}
		if refused == errPrivatePreview {
			refused = err // the first cookie's reason
		}
	}
	return refused
}

// servesHTTPS reports whether r reached the daemon over HTTPS: its own
// TLS, or a public URL of https, whose proxy in front terminates it.
func (s *Server) servesHTTPS(r *http.Request) bool {
	u, err := url.Parse(s.publicURL)
	return r.TLS != nil || err == nil && strings.EqualFold(u.Scheme, "https")
}

// isLocalhost reports whether host (with or without a port) is a localhost
// name, which browsers treat as secure even over plain HTTP.
func isLocalhost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

var errPrivatePreview = errdefs.Unauthenticated("this preview is private: send the API key, or open a preview link (POST /v1/sandboxes/{id}/services/{name}/link, hutch service link)")

// checkLink checks a link's token for target t. A link is its service's:
// once the service is gone, or another listens on its port, or its links
// were revoked at or after it was made (a link without an issue time was
// made at 0), it opens nothing. (Links made before they named their
// service open their port until they expire, or until the links of a
// service on that port are revoked.)
func (s *Server) checkLink(ctx context.Context, tok string, t preview.Target) (download.Claim, error) {
	claim, err := s.links.Check(tok, time.Now())
	switch {
	case errors.Is(err, download.ErrExpired):
		return claim, errdefs.Unauthenticated("this preview link has expired: ask for a new one")
	case err != nil || claim.Sandbox != t.Sandbox || claim.Port != t.Port:
		return claim, errdefs.Unauthenticated("this preview link is not valid for this preview")
	case claim.Service == "":
		all, err := s.execs.Services(ctx, t.Sandbox)
		if err != nil {
			return claim, errdefs.Unauthenticated("this preview link is not valid for this preview")
		}
		if slices.ContainsFunc(all, func(svc exec.ServiceInfo) bool { return svc.Port == t.Port && revoked(svc, claim) }) {
			return claim, errRevokedLink
		}
		return claim, nil
	}
	svc, err := s.execs.Service(ctx, t.Sandbox, claim.Service)
	if err != nil || svc.Port != t.Port {
		return claim, errdefs.Unauthenticated("this preview link's service %s is no longer on this port: ask for a new link", claim.Service)
	}
	if revoked(svc, claim) {
		return claim, errRevokedLink
	}
	return claim, nil
}

var errRevokedLink = errdefs.Unauthenticated("this preview link has been revoked: ask for a new one")

// revoked says whether svc's links were revoked at or after the link of
// claim was made.
func revoked(svc exec.ServiceInfo, claim download.Claim) bool {
	return !svc.LinksRevoked.IsZero() && svc.LinksRevoked.UnixMilli() >= claim.Issued
}

// cookiePath scopes a link's cookie to its preview: the whole host with
// host routing, the sandbox's port's prefix with path routing.
func cookiePath(t preview.Target) string {
	if t.Prefix == "" {
		return "/"
	}
	return t.Prefix + "/"
}

// serviceLink answers POST …/services/{name}/link: a URL of the service's
// preview that opens without the key until it expires.
func (s *Server) serviceLink(w http.ResponseWriter, r *http.Request) {
	var req client.ServiceLinkRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decode(r, &req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	ttl, err := linkTTL(req.ExpiresInS)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out, err := s.link(r.Context(), r.PathValue("id"), r.PathValue("name"), "", ttl)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// linkTTL is how long a link asked to last expiresInS seconds lasts: the
// default for 0, refused past the most.
func linkTTL(expiresInS int) (time.Duration, error) {
	ttl := time.Duration(expiresInS) * time.Second
	switch {
	case ttl == 0:
		return defaultLinkTTL, nil
	case ttl < 0 || ttl > maxLinkTTL:
		return 0, errdefs.InvalidArgument("expires_in_s must be between 1 and %d", int(maxLinkTTL.Seconds()))
	}
	return ttl, nil
}

// link makes a preview link to service name of sandbox id, valid for ttl,
// to page (a path and query on the service, without its leading slash).
func (s *Server) link(ctx context.Context, id, name, page string, ttl time.Duration) (client.ServiceLink, error) {
	if s.links == nil || s.previews == nil {
		return client.ServiceLink{}, errdefs.NotImplemented("previews are off in this daemon")
	}
	svc, err := s.execs.Service(ctx, id, name)
	if err != nil {
		return client.ServiceLink{}, err
	}
	now := time.Now()
	expires := now.Add(ttl).UTC().Truncate(time.Second)
	tok, err := s.links.Sign(download.Claim{Sandbox: id, Path: "/", Port: svc.Port, Service: svc.Name, Issued: now.UnixMilli(), Expires: expires.Unix()})
	if err != nil {
		return client.ServiceLink{}, err
	}
	urls := s.previewURLs(id, svc.Port)
	out := client.ServiceLink{ExpiresAt: expires, PathURL: withToken(urls.path+page, tok)}
	if urls.host != "" {
		out.URL = withToken(urls.host+page, tok)
	} else {
		out.URL = out.PathURL
	}
	return out, nil
}

// revokeServiceLinks answers DELETE …/services/{name}/link: every link
// made for the service until now opens nothing from then on.
func (s *Server) revokeServiceLinks(w http.ResponseWriter, r *http.Request) {
	if err := s.execs.RevokeServiceLinks(r.Context(), r.PathValue("id"), r.PathValue("name")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// A link's issue time is in milliseconds, and one made in the
	// revocation's millisecond counts as revoked: the answer waits for
	// the next, so that a link asked for after it works.
	time.Sleep(time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
}

// withToken adds a link's token to u's query.
func withToken(u, tok string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + previewTokenParam + "=" + url.QueryEscape(tok)
}

// previewURLs are the URLs of a sandbox's port: by host (empty when host
// routing is off) and by path.
type previewURLs struct{ host, path string }

func (s *Server) previewURLs(id string, port int) previewURLs {
	base, err := url.Parse(s.publicURL)
	if err != nil || base.Host == "" {
		base = &url.URL{Scheme: "http", Host: "127.0.0.1"}
	}
	out := previewURLs{path: base.Scheme + "://" + base.Host + "/v1/sandboxes/" + id + "/ports/" + strconv.Itoa(port) + "/"}
	if domain := s.previews.Domain(); domain != "" {
		host := strconv.Itoa(port) + "-" + id + "." + domain
		if p := base.Port(); p != "" {
			host += ":" + p
		}
		out.host = base.Scheme + "://" + host + "/"
	}
	return out
}
