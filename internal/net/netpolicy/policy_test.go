package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

// TEST-NET addresses stand for public hosts (egress counts the
// documentation ranges as outside).
var (
	public  = netip.MustParseAddr("203.0.113.7")
	public2 = netip.MustParseAddr("198.51.100.20")
	public6 = netip.MustParseAddr("2001:db8::1")
)

// connectCase is a connection and the decision it must get.
type connectCase struct {
	c     *Checker
	name  string
	addr  netip.Addr
	port  uint16
	allow bool
	rule  string
}

func checkConnects(t *testing.T, cases []connectCase) {
	t.Helper()
	for _, tc := range cases {
		d := tc.c.Connect(tc.name, tc.addr, tc.port)
		if d.Allowed != tc.allow || d.Rule != tc.rule {
			t.Errorf("%s: Connect(%q, %s, %d) = %+v, want allowed %v by rule %q", tc.c.policy.Mode, tc.name, tc.addr, tc.port, d, tc.allow, tc.rule)
		}
		if !d.Allowed && d.Reason == "" {
			t.Errorf("Connect(%q, %s, %d): a refusal without a reason", tc.name, tc.addr, tc.port)
		}
	}
}

func mustCompile(t *testing.T, p Policy) *Checker {
	t.Helper()
	c, err := Compile(p)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", p, err)
	}
	return c
}

func TestCompileRejectsBadPolicies(t *testing.T) {
	many := make([]string, MaxRules+1)
	for i := range many {
		many[i] = "example.com"
	}
	for _, tc := range []struct {
		p    Policy
		want string // in the error
	}{
		{Policy{Mode: "open"}, `network mode "open" is not one of none, allowlist, full and learn`},
		{Policy{Mode: ""}, "network mode"},
		{Policy{Mode: Full, Allow: []string{"example.com"}}, "allow rules need mode allowlist (mode full allows every public destination)"},
		{Policy{Mode: None, Allow: []string{"example.com"}}, "mode none allows nothing"},
		{Policy{Mode: Allowlist, Allow: []string{"exa mple.com"}}, `network rule "exa mple.com": not a host name`},
		{Policy{Mode: Allowlist, Allow: []string{"example.com:0"}}, "port is not a number from 1 to 65535"},
		{Policy{Mode: Allowlist, Allow: []string{"example.com:https"}}, "port is not a number"},
		{Policy{Mode: Allowlist, Allow: []string{""}}, "empty"},
		{Policy{Mode: Allowlist, Allow: []string{"*."}}, "not a host name"},
		{Policy{Mode: Allowlist, Allow: []string{"*.*.example.com"}}, "not a host name"},
		{Policy{Mode: Full, Deny: []string{"ok.example", "http://x.example/"}}, `network rule "http://x.example/"`},
		{Policy{Mode: Allowlist, Allow: many}, "at most 256 rules"},
	} {
		_, err := Compile(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want an error saying %q", tc.p, err, tc.want)
		}
	}
	// Every bad rule is named at once, with how to write one.
	_, err := Compile(Policy{Mode: Allowlist, Allow: []string{"a b", "ok.example"}, Deny: []string{"c d"}})
	if err == nil || !strings.Contains(err.Error(), `"a b"`) || !strings.Contains(err.Error(), `"c d"`) || !strings.Contains(err.Error(), "203.0.113.0/24") {
		t.Errorf("two bad rules: %v", err)
	}
}

func TestModes(t *testing.T) {
	none := mustCompile(t, Policy{Mode: None})
	full := mustCompile(t, Policy{Mode: Full})
	list := mustCompile(t, Policy{Mode: Allowlist, Allow: []string{"pypi.org", "files.example:443", "*.npmjs.org", "198.51.100.0/24", "[2001:db8::1]:22"}})
	checkConnects(t, []connectCase{
		{none, "pypi.org", public, 443, false, "mode"},
		{none, "", public, 22, false, "mode"},
		{full, "pypi.org", public, 443, true, "mode"},
		{full, "", public, 22, true, "mode"},
		{full, "", public6, 22, true, "mode"},
		// A name rule without a port: any port the name was read on.
		{list, "pypi.org", public, 443, true, "pypi.org"},
		{list, "PyPI.org.", public, 80, true, "pypi.org"},
		{list, "pypi.org", public, 8443, true, "pypi.org"},
		// With a port: that port only.
		{list, "files.example", public, 443, true, "files.example:443"},
		{list, "files.example", public, 80, false, "mode"},
		// A wildcard: subdomains, not the domain, not a look-alike.
		{list, "registry.npmjs.org", public, 443, true, "*.npmjs.org"},
		{list, "npmjs.org", public, 443, false, "mode"},
		{list, "evilnpmjs.org", public, 443, false, "mode"},
		// The allowed server by address, without its name: refused.
		{list, "", public, 443, false, "mode"},
		// An address rule allows any connection to its addresses.
		{list, "", public2, 5432, true, "198.51.100.0/24"},
		{list, "other.example", public2, 443, true, "198.51.100.0/24"},
		{list, "", public6, 22, true, "[2001:db8::1]:22"},
		{list, "", public6, 23, false, "mode"},
		{list, "other.example", public, 443, false, "mode"},
	})
}

// Whatever the policy, an address that leads inward is refused: an allow
// rule naming it, a name allowed whose DNS points inward, mode full.
func TestInwardIsAlwaysRefused(t *testing.T) {
	policies := []*Checker{
		mustCompile(t, Policy{Mode: Full}),
		mustCompile(t, Policy{Mode: Allowlist, Allow: []string{"inside.example", "10.0.0.0/8", "127.0.0.1", "169.254.169.254",
			// As wide as allow rules go (0.0.0.0/0 is refused), covering
			// every address below.
			"127.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "224.0.0.0/8", "255.0.0.0/8", "0.0.0.0/8",
			"fd00::/32", "fd00:ec2::/32", "fe80::/32", "ff02::/32", "::/128", "::1/128"}}),
	}
	for _, addr := range []string{
		"127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "fd00::1",
		"169.254.169.254", "fd00:ec2::254", "fe80::1", "100.64.0.1",
		"224.0.0.1", "ff02::1", "255.255.255.255", "0.0.0.0", "::",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1",
	} {
		a := netip.MustParseAddr(addr)
		for _, c := range policies {
			for _, name := range []string{"", "inside.example"} {
				d := c.Connect(name, a, 443)
				if d.Allowed || d.Rule != "always" || !strings.Contains(d.Reason, "no sandbox may reach") {
					t.Errorf("%s: Connect(%q, %s) = %+v, want refused always", c.policy.Mode, name, addr, d)
				}
			}
		}
	}
	d := policies[0].Connect("", netip.MustParseAddr("169.254.169.254"), 80)
	if !strings.Contains(d.Reason, "link-local") || !strings.Contains(d.Reason, "169.254.169.254:80") {
		t.Errorf("metadata refusal: %q, want it to say link-local and the destination", d.Reason)
	}
	if d := policies[0].Connect("x.example", netip.Addr{}, 443); d.Allowed {
		t.Errorf("no address: %+v, want refused", d)
	}
}

func TestDenyWins(t *testing.T) {
	full := mustCompile(t, Policy{Mode: Full, Deny: []string{"*.ads.example", "tracker.example:443", "198.51.100.0/24"}})
	list := mustCompile(t, Policy{Mode: Allowlist, Allow: []string{"*.example.org"}, Deny: []string{"secret.example.org"}})
	checkConnects(t, []connectCase{
		{full, "x.ads.example", public, 443, false, "*.ads.example"},
		{full, "tracker.example", public, 443, false, "tracker.example:443"},
		{full, "tracker.example", public, 80, true, "mode"},
		{full, "ok.example", public2, 443, false, "198.51.100.0/24"},
		{full, "", public2, 22, false, "198.51.100.0/24"},
		{list, "www.example.org", public, 443, true, "*.example.org"},
		{list, "secret.example.org", public, 443, false, "secret.example.org"},
	})
}

func TestNames(t *testing.T) {
	list := mustCompile(t, Policy{Mode: Allowlist, Allow: []string{"pypi.org:443", "*.npmjs.org", "198.51.100.0/24"}, Deny: []string{"bad.npmjs.org"}})
	full := mustCompile(t, Policy{Mode: Full, Deny: []string{"*.ads.example"}})
	none := mustCompile(t, Policy{Mode: None})
	for _, tc := range []struct {
		c     *Checker
		name  string
		allow bool
	}{
		{list, "pypi.org", true}, // its port is checked at the connection
		{list, "PYPI.ORG.", true},
		{list, "registry.npmjs.org", true},
		{list, "bad.npmjs.org", false},
		{list, "example.com", false}, // an address rule allows no name
		{full, "anything.example", true},
		{full, "x.ads.example", false},
		{none, "pypi.org", false},
	} {
		if d := tc.c.Name(tc.name); d.Allowed != tc.allow || (!d.Allowed && d.Reason == "") {
			t.Errorf("%s: Name(%q) = %+v, want allowed %v", tc.c.policy.Mode, tc.name, d, tc.allow)
		}
	}
}

func TestModeOrder(t *testing.T) {
	for _, tc := range []struct {
		m, limit Mode
		ok       bool
	}{
		{None, None, true}, {None, Full, true}, {Allowlist, Full, true}, {Full, Full, true},
		{Allowlist, None, false}, {Full, Allowlist, false}, {"bogus", Full, false},
		{Learn, Full, true}, {Learn, Allowlist, false}, {Full, Learn, true},
	} {
		if got := tc.m.AtMost(tc.limit); got != tc.ok {
			t.Errorf("%s.AtMost(%s) = %v, want %v", tc.m, tc.limit, got, tc.ok)
		}
	}
}
