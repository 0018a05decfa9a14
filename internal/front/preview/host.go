package preview

import (
	"fmt"
	"strconv"
	"strings"
)

// Host routing: a preview's URL is http://{port}-{sandbox}.{domain}:{api
// port}/…, whose host a browser sends as the request's Host. With the
// default domain, localhost, browsers resolve every such name to the
// loopback by themselves: previews work on a laptop with no DNS set up.
// Elsewhere, a wildcard DNS record (*.preview.example.com) points at the
// daemon.

// DefaultDomain is host routing's domain when the daemon is told none.
const DefaultDomain = "localhost"

// Domain is host routing's domain; "" when host routing is off.
func (p *Proxy) Domain() string { return p.cfg.Domain }

// Route returns where a request whose Host header is host goes by host
// routing, and false when host names no preview (the API's own host).
func (p *Proxy) Route(host string) (Target, bool) {
	if p.cfg.Domain == "" {
		return Target{}, false
	}
	return ParseHost(host, p.cfg.Domain)
}

// ParseHost reads "{port}-{sandbox}.{domain}", with or without ":port"
// after it, in any case. ok is false for any other host.
func ParseHost(host, domain string) (t Target, ok bool) {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || strings.Contains(label, ".") {
		return Target{}, false
	}
	portText, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portText)
	if !ok || err != nil || strconv.Itoa(port) != portText || port < 1 || port > 65535 || !isID(id) {
		return Target{}, false
	}
	return Target{Sandbox: id, Port: port}, true
}

// isID says whether s may be a sandbox's id: letters and digits
// (create.NewID's), and hyphens.
func isID(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// CheckDomain checks a host routing domain: a DNS name in lower case,
// without a port.
func CheckDomain(domain string) error {
	bad := fmt.Errorf("a preview domain is a DNS name in lower case, without a port, got %q", domain)
	if domain == "" || len(domain) > 200 {
		return bad
	}
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return bad
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return bad
			}
		}
	}
	return nil
}
