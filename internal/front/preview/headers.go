package preview

import (
	"net/http"
	"strings"
)

// What is meant for Hutch never reaches a sandbox: a preview's server is
// the sandbox's code, which must not learn the caller's API key (in an
// Authorization or X-Api-Key header, or offered as a WebSocket
// subprotocol), a preview link's cookie, or what the caller tells Hutch.
// Nor may it set a cookie of Hutch's names: a preview link's cookie is
// Hutch's to set.
//
// And tenant content is never served on the origin of the API and the
// console as a page of that origin: a path-routed preview
// (/v1/sandboxes/{id}/ports/{port}/…, on the API's listener) is answered
// with a Content-Security-Policy sandbox without allow-same-origin, which
// gives its pages an opaque origin of their own: they cannot read the
// console's storage, call the API with the browser's credentials, or
// register a service worker (which would see every later request of the
// origin, the console's key included). Service-Worker-Allowed, which
// would widen a worker's scope beyond its script's path, never leaves a
// path-routed preview, and a service worker's script is never fetched
// from one. A host-routed preview has an origin of its own, and is
// answered as its server answers.

// hutchHeaderPrefix starts the headers meant for Hutch (Hutch-User,
// Hutch-Workspace, …), in any case.
const hutchHeaderPrefix = "Hutch-"

// hutchCookiePrefix starts the names of Hutch's cookies.
const hutchCookiePrefix = "hutch_"

// hutchProtocolPrefix starts the WebSocket subprotocols of Hutch's:
// hutch.v1, and hutch.bearer.<key>, which carries an API key (the API's
// wsBearerPrefix).
const hutchProtocolPrefix = "hutch."

// hutchProtocol is the subprotocol a browser offers beside its key, which
// the daemon picks for it (the API's wsProtocol).
const hutchProtocol = "hutch.v1"

// hutchKeyPrefixes start Hutch's API keys, in Hutch's shape and in E2B's
// (internal/front/e2b): a credential of that shape is Hutch's, whoever sends
// it.
var hutchKeyPrefixes = []string{"hutch_", "e2b_"}

// pathSandboxPolicy is the Content-Security-Policy added to every answer
// of a path-routed preview: its pages run scripts, forms, pop-ups and
// downloads, in an opaque origin (never allow-same-origin).
const pathSandboxPolicy = "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads"

// stripRequest removes from a request's header what was meant for Hutch:
// Hutch-* headers, hutch_* cookies, hutch.* subprotocols, an
// Authorization or X-Api-Key header that carries a key of Hutch's shape,
// and with auth, the Authorization header whatever it holds (it carried
// the API key). It reports whether hutch.v1 was offered.
func stripRequest(h http.Header, auth bool) (offeredHutchProtocol bool) {
	if auth || isHutchCredential(h.Get("Authorization")) {
		h.Del("Authorization")
	}
	if isHutchCredential(h.Get("X-Api-Key")) {
		h.Del("X-Api-Key")
	}
	for name := range h {
		if len(name) >= len(hutchHeaderPrefix) && strings.EqualFold(name[:len(hutchHeaderPrefix)], hutchHeaderPrefix) {
			delete(h, name)
		}
	}
	offeredHutchProtocol = stripProtocols(h)
	stripCookies(h)
	return offeredHutchProtocol
}

// isHutchCredential says whether an Authorization or X-Api-Key value
// carries a key of Hutch's shape: bare, or after a scheme (Bearer, Token,
// …).
func isHutchCredential(v string) bool {
	v = strings.TrimSpace(v)
	if _, cred, ok := strings.Cut(v, " "); ok {
		v = strings.TrimSpace(cred)
	}
	for _, p := range hutchKeyPrefixes {
		if len(v) >= len(p) && strings.EqualFold(v[:len(p)], p) {
			return true
		}
	}
	return false
}

// stripProtocols removes Hutch's subprotocols from the ones a WebSocket
// offers, reporting whether hutch.v1 was among them.
func stripProtocols(h http.Header) (offeredHutchProtocol bool) {
	lines := h.Values("Sec-WebSocket-Protocol")
	if len(lines) == 0 {
		return false
	}
	var kept []string
	for _, line := range lines {
		for p := range strings.SplitSeq(line, ",") {
			p = strings.TrimSpace(p)
			switch {
			case strings.EqualFold(p, hutchProtocol):
				offeredHutchProtocol = true
			case len(p) >= len(hutchProtocolPrefix) && strings.EqualFold(p[:len(hutchProtocolPrefix)], hutchProtocolPrefix), p == "":
			default:
				kept = append(kept, p)
			}
		}
	}
	h.Del("Sec-WebSocket-Protocol")
	if len(kept) > 0 {
		h.Set("Sec-WebSocket-Protocol", strings.Join(kept, ", "))
	}
	return offeredHutchProtocol
}

// stripCookies removes Hutch's cookies from a request's Cookie headers.
func stripCookies(h http.Header) {
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	var kept []string
	for _, line := range cookies {
		for pair := range strings.SplitSeq(line, ";") {
			pair = strings.TrimSpace(pair)
			name, _, _ := strings.Cut(pair, "=")
			if pair != "" && !isHutchCookie(strings.TrimSpace(name)) {
				kept = append(kept, pair)
			}
		}
	}
	if len(kept) == 0 {
		h.Del("Cookie")
		return
	}
	h.Set("Cookie", strings.Join(kept, "; "))
}

// stripResponse makes a sandbox's answer the one the client gets: without
// the cookies it sets under Hutch's names; for a path-routed preview,
// sandboxed in an opaque origin and without Service-Worker-Allowed; and
// for a WebSocket whose client offered hutch.v1 beside its key, with
// hutch.v1 picked when the server picked none (a browser drops an upgrade
// that picks none of the subprotocols it offered).
func stripResponse(res *http.Response) error {
	req := requestOf(res.Request)
	if req.target.Prefix != "" {
		res.Header.Del("Service-Worker-Allowed")
		res.Header.Add("Content-Security-Policy", pathSandboxPolicy)
	}
	if res.StatusCode == http.StatusSwitchingProtocols && req.offeredHutchProtocol && res.Header.Get("Sec-WebSocket-Protocol") == "" {
		res.Header.Set("Sec-WebSocket-Protocol", hutchProtocol)
	}
	set := res.Header.Values("Set-Cookie")
	if len(set) == 0 {
		return nil
	}
	var kept []string
	for _, c := range set {
		name, _, _ := strings.Cut(c, "=")
		if !isHutchCookie(strings.TrimSpace(name)) {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(set) {
		return nil
	}
	res.Header["Set-Cookie"] = kept
	if len(kept) == 0 {
		res.Header.Del("Set-Cookie")
	}
	return nil
}

// isHutchCookie says whether a cookie of that name is Hutch's. Browsers
// match cookie names exactly; Hutch's are recognised in any case, so that
// none passes by a change of case.
func isHutchCookie(name string) bool {
	return len(name) >= len(hutchCookiePrefix) && strings.EqualFold(name[:len(hutchCookiePrefix)], hutchCookiePrefix)
}
