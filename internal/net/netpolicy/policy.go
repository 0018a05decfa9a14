// Package netpolicy decides where a sandbox may connect: its network mode,
// its allow and deny rules, and what is refused whatever they say.
//
// A Policy is what a caller gives ("network": {"mode": "allowlist",
// "allow": ["pypi.org", "*.githubusercontent.com:443", "203.0.113.0/24"]});
// Compile checks it once and returns a Checker, which the daemon asks for
// every connection and every DNS lookup a sandbox makes. The Checker only
// decides: resolving names, dialling and telling the sandbox are the
// daemon's.
//
// The order of a decision, for every mode:
//
//  1. an address that leads inward is refused (see Inward): the host's own
//     addresses, loopback, private ranges, link-local (cloud metadata
//     too), CGNAT, multicast, broadcast, and so every other sandbox;
//  2. a deny rule that matches refuses;
//  3. mode none refuses; mode full allows; mode allowlist allows only what
//     an allow rule matches.
//
// Rules are of two kinds. A name rule ("example.com", "*.example.com",
// either with ":port") matches a connection whose destination name the
// daemon read from it (TLS SNI, the HTTP Host) or a DNS question; without a
// port it matches any port. An address rule ("203.0.113.7",
// "203.0.113.0/24", "2001:db8::/32", with ":port" for a single address as
// "[2001:db8::1]:22") matches the address dialled. A connection whose name
// is known is allowed by a name rule, or by an address rule covering every
// address the daemon dials for it; one whose name is not known (plain TCP,
// or TLS without SNI) only by an address rule, so that an allowed name
// cannot be paired with an address of the sandbox's choosing.
//
// An allow rule may not be so wide that mode allowlist becomes mode full
// in all but name: a key limited to allowlist would otherwise get full by
// writing "*", "*.com" or 0.0.0.0/0. So an allow rule is refused when it is
// a bare "*", a wildcard over a top-level domain or another suffix a
// registry sells names under ("*.com", "*.co.uk": the public suffix list's
// ICANN part), or an address range
// wider than MaxPrefixV4 (a /8, the largest block one organisation was
// ever given) or MaxPrefixV6 (a /32, a registry's usual allocation to
// one provider). Deny rules may be as wide as wished.
package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/egress"
)

// Mode is how much of the network a sandbox may reach.
type Mode string

const (
	// None: loopback only.
	None Mode = "none"
	// Allowlist: only what the allow rules name, minus the deny rules.
	Allowlist Mode = "allowlist"
	// Full: the public internet, minus the deny rules.
	Full Mode = "full"
	// Learn: what full allows, while the daemon keeps every destination
	// the sandbox reached, for the smallest allow-list that would have
	// let it through (internal/core/network's Proposal).
	Learn Mode = "learn"
)

// Modes lists the modes from the most to the least isolated (learn is as
// isolated as full).
var Modes = []Mode{None, Allowlist, Full, Learn}

// ParseMode checks a mode's name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("network mode %q is not one of none, allowlist, full and learn", s)
}

// AtMost reports whether m is at least as isolated as limit (none is the
// most isolated, full the least): whether a key limited to limit may ask
// for m.
func (m Mode) AtMost(limit Mode) bool { return rank(m) <= rank(limit) }

func rank(m Mode) int {
	if m == Learn {
		m = Full // what it allows
	}
	for i, x := range Modes {
		if x == m {
			return i
		}
	}
	return len(Modes) // unknown: less isolated than any
}

// Policy is a sandbox's network policy as a caller gives it.
type Policy struct {
	Mode  Mode     `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// MaxRules bounds the rules of one policy, allow and deny together.
const MaxRules = 256

// The widest address ranges an allow rule may name (see the package
// comment): an IPv4 /8 is one organisation's block at most (17.0.0.0/8,
// say), an IPv6 /32 one provider's allocation; anything wider spans many
// owners, which is what mode full is for. An IPv6 range that carries IPv4
// addresses (NAT64, 6to4) is bounded as the IPv4 range it carries.
const (
	MaxPrefixV4 = 8
	MaxPrefixV6 = 32
)

// Checker decides connections and lookups for one policy. It does not
// change once made: a changed policy is a new Checker.
type Checker struct {
	policy Policy
	allow  []rule
	deny   []rule
	// inward decides what is refused whatever the rules say; Inward by
	// default.
	inward func(netip.Addr) bool
}

// Compile checks p and returns its Checker. The error names every rule
// that does not parse, and how to write it.
// Every error is an errdefs.ErrInvalidArgument.
func Compile(p Policy) (*Checker, error) {
	if _, err := ParseMode(string(p.Mode)); err != nil {
		return nil, errdefs.InvalidArgument("%v", err)
	}
	if n := len(p.Allow) + len(p.Deny); n > MaxRules {
		return nil, errdefs.InvalidArgument("a network policy has at most %d rules, this one has %d", MaxRules, n)
	}
	if p.Mode != Allowlist && len(p.Allow) > 0 {
		return nil, errdefs.InvalidArgument("allow rules need mode allowlist (mode %s allows %s)", p.Mode, map[Mode]string{None: "nothing", Full: "every public destination", Learn: "every public destination"}[p.Mode])
	}
	c := &Checker{policy: p, inward: Inward}
	var errs []string
	for _, list := range []struct {
		entries []string
		into    *[]rule
		allow   bool
	}{{p.Allow, &c.allow, true}, {p.Deny, &c.deny, false}} {
		for _, e := range list.entries {
			r, err := parseRule(e)
			if err == nil && list.allow {
				err = r.checkBreadth()
			}
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			*list.into = append(*list.into, r)
		}
	}
	if len(errs) > 0 {
		return nil, errdefs.InvalidArgument("%s", strings.Join(errs, "; "))
	}
	return c, nil
}

// Policy is the policy c was compiled from.
func (c *Checker) Policy() Policy { return c.policy }

// Decision is the answer for one connection or lookup. A refusal says which
// rule refused (a rule as written, or "always" for what no policy allows,
// or "mode" for what the mode leaves out) and why, for a person or a model
// to act on.
type Decision struct {
	Allowed bool
	Rule    string
	Reason  string
}

func allow(rule string) Decision { return Decision{Allowed: true, Rule: rule} }

func refuse(rule, format string, args ...any) Decision {
	return Decision{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// Name decides a DNS question for name: whether the sandbox may learn its
// addresses. (Which of them it may reach is Connect's to decide.)
func (c *Checker) Name(name string) Decision {
	name = normalName(name)
	return c.decide(name, name, netip.Addr{}, 0)
}

// Connect decides a connection to addr:port, made for name when name is
// not empty (read from the connection: TLS SNI, HTTP Host). For a named
// connection the daemon calls it once per address it resolved for name,
// and dials only those allowed.
func (c *Checker) Connect(name string, addr netip.Addr, port uint16) Decision {
	name = normalName(name)
	addr = addr.Unmap()
	dest := net.JoinHostPort(addr.String(), strconv.Itoa(int(port)))
	if name != "" {
		dest = net.JoinHostPort(name, strconv.Itoa(int(port)))
		if addr.IsValid() {
			dest += " (" + addr.String() + ")"
		}
	}
	if !addr.IsValid() {
		return refuse("always", "%s: no address to connect to", dest)
	}
	if c.inward(addr) {
		return refuse("always", "%s is %s, which no sandbox may reach", dest, describeInward(addr))
	}
	return c.decide(dest, name, addr, port)
}

// decide applies the deny rules, the mode and the allow rules, in that
// order, to a destination (dest says it for a person).
func (c *Checker) decide(dest, name string, addr netip.Addr, port uint16) Decision {
	if r, ok := match(c.deny, name, addr, port); ok {
		return refuse(r.text, "%s is denied by the rule %s", dest, r.text)
	}
	switch c.policy.Mode {
	case None:
		return refuse("mode", "the sandbox's network mode is none: it reaches no host")
	case Full, Learn:
		return allow("mode")
	}
	if r, ok := match(c.allow, name, addr, port); ok {
		return allow(r.text)
	}
	if name == "" {
		return refuse("mode", "%s is not in the allow-list (a connection whose host name the daemon cannot read, plain TCP or TLS without SNI, is allowed only by an address rule)", dest)
	}
	return refuse("mode", "%s is not in the allow-list", dest)
}

// Inward reports whether addr leads inward, never to be reached from a
// sandbox: the host's own addresses and networks, loopback, private ranges
// (RFC 1918, ULA), link-local (169.254.169.254 and fd00:ec2::254 too),
// CGNAT, multicast, broadcast, reserved and unspecified addresses. It is
// internal/net/egress's Outward, negated: builds and sandboxes share one
// definition of outward.
func Inward(addr netip.Addr) bool { return !egress.Outward(addr) }

// describeInward says which kind of inward address addr is, for a refusal.
func describeInward(addr netip.Addr) string {
	switch {
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsPrivate():
		return "a private address"
	case addr.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata lives there)"
	case addr.IsMulticast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast():
		return "a multicast address"
	case addr.IsUnspecified():
		return "the unspecified address"
	case egress.OutsideIP(addr):
		return "an address of the host's own networks"
	}
	return "not a public address"
}

// rule is one parsed allow or deny entry.
type rule struct {
	text     string // as written, for decisions
	name     string // a name, or for a wildcard the suffix with its dot
	wildcard bool
	prefix   netip.Prefix // an address rule; a single address is a /32 or /128
	port     uint16       // 0: any port
}

// parseRule parses an allow or deny entry.
func parseRule(entry string) (rule, error) {
	bad := func(why string) (rule, error) {
		return rule{}, fmt.Errorf("network rule %q: %s (write a name such as example.com or *.example.com, optionally with :port, or an address or CIDR such as 203.0.113.7, 203.0.113.0/24 or [2001:db8::1]:22)", entry, why)
	}
	s := strings.TrimSpace(entry)
	switch s {
	case "":
		return bad("empty")
	case "*", "*.*":
		return rule{}, fmt.Errorf("network rule %q: a wildcard over every name is mode full, not a rule (ask for mode full, if the key allows it, or name the hosts: example.com, *.example.com)", entry)
	}
	r := rule{text: s}
	if p, err := netip.ParsePrefix(s); err == nil {
		r.prefix = p.Masked()
		return r, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		r.prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return r, nil
	}
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return bad("the port is not a number from 1 to 65535")
		}
		host, r.port = h, uint16(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return r, nil
	}
	suffix, wildcard := strings.CutPrefix(host, "*.")
	if !egress.ValidHostname(normalName(suffix)) {
		return bad("not a host name")
	}
	if wildcard {
		r.name, r.wildcard = "."+normalName(suffix), true
	} else {
		r.name = normalName(host)
	}
	return r, nil
}

// nat64 is the IPv6 range whose addresses carry an IPv4 address in their
// last 32 bits: an allow rule in it is bounded as the IPv4 range it
// carries. (6to4's 2002::/16 carries one in bits 16 to 48: the IPv6 bound
// of a /32 is already an IPv4 /16 there.)
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// checkBreadth refuses an allow rule so wide that it allows what mode full
// does (see the package comment), saying what to write instead.
func (r rule) checkBreadth() error {
	if r.prefix.IsValid() {
		p := r.prefix
		bits, most, what := p.Bits(), MaxPrefixV4, "IPv4"
		switch {
		case p.Addr().Is4In6():
			return fmt.Errorf("network rule %q: an IPv4-mapped range; write the IPv4 range itself, such as 203.0.113.0/24", r.text)
		case p.Addr().Is6() && bits < MaxPrefixV6:
			most, what = MaxPrefixV6, "IPv6"
		case nat64.Overlaps(p):
			bits, what = bits-nat64.Bits(), "IPv4 (carried in NAT64 addresses)"
		case p.Addr().Is6():
			return nil
		}
		if bits < most {
			return fmt.Errorf("network rule %q: allows more than a /%d of %s, which is the internet rather than a destination (name the hosts, such as api.example.com, or a narrower range, such as 203.0.113.0/24; for everything, ask for mode full if the key allows it)", r.text, most, what)
		}
		return nil
	}
	if !r.wildcard {
		return nil
	}
	// A top-level domain, listed or not, or a suffix under which a
	// registry sells names (co.uk). The list's private part (github.io,
	// s3.amazonaws.com) is one platform's, and a wildcard over it is
	// allowed: it allows that platform, which hosts many owners, as it
	// says.
	suffix := strings.TrimPrefix(r.name, ".")
	if ps, icann := publicsuffix.PublicSuffix(suffix); !strings.Contains(suffix, ".") || ps == suffix && icann {
		return fmt.Errorf("network rule %q: %s is a public suffix, under which anyone may register a name, so the wildcard allows hosts of every owner (name a domain under it, such as *.example.%s, or ask for mode full, if the key allows it)", r.text, suffix, suffix)
	}
	return nil
}

// matches reports whether r matches a destination: its name (may be empty)
// and address (invalid for a DNS question), and port (0 for a DNS question,
// which a name rule with a port still lets through: the port is checked at
// the connection).
func (r rule) matches(name string, addr netip.Addr, port uint16) bool {
	if r.port != 0 && port != 0 && r.port != port {
		return false
	}
	if r.prefix.IsValid() {
		return addr.IsValid() && r.prefix.Contains(addr)
	}
	return r.matchesName(name)
}

func (r rule) matchesName(name string) bool {
	if name == "" {
		return false
	}
	if !r.wildcard {
		return name == r.name
	}
	// Something non-empty, then the suffix with its dot: "evilexample.org"
	// is not under "*.example.org".
	return len(name) > len(r.name) && strings.HasSuffix(name, r.name)
}

// match returns the first rule of rules that matches.
func match(rules []rule, name string, addr netip.Addr, port uint16) (rule, bool) {
	for _, r := range rules {
		if r.matches(name, addr, port) {
			return r, true
		}
	}
	return rule{}, false
}

// normalName lower-cases a DNS name and drops its final dot.
func normalName(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}
