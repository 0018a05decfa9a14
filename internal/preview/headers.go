package preview

import (
	"net/http"
	"strings"
)

// What is meant for Hutch never reaches a sandbox: a preview's server is
// the sandbox's code, which must not learn the caller's API key, a preview
// link's cookie, or what the caller tells Hutch. Nor may it set a cookie
// of Hutch's names: a preview link's cookie is Hutch's to set.

// hutchHeaderPrefix starts the headers meant for Hutch (Hutch-User,
// Hutch-Workspace, …), in any case.
const hutchHeaderPrefix = "Hutch-"

// hutchCookiePrefix starts the names of Hutch's cookies.
const hutchCookiePrefix = "hutch_"

// stripRequest removes from a request's header what was meant for Hutch:
// Hutch-* headers, hutch_* cookies, and with auth, the Authorization
// header (it carried the API key).
func stripRequest(h http.Header, auth bool) {
	if auth {
		h.Del("Authorization")
	}
	for name := range h {
		if len(name) >= len(hutchHeaderPrefix) && strings.EqualFold(name[:len(hutchHeaderPrefix)], hutchHeaderPrefix) {
			delete(h, name)
		}
	}
	cookies := h.Values("Cookie")
	if len(cookies) == 0 {
		return
	}
	var kept []string
	for _, line := range cookies {
		for pair := range strings.SplitSeq(line, ";") {
			pair = strings.TrimSpace(pair)
			name, _, _ := strings.Cut(pair, "=")
			if pair != "" && !isHutchCookie(name) {
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

// stripResponse removes from a sandbox's answer the cookies it sets under
// Hutch's names.
func stripResponse(res *http.Response) error {
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
