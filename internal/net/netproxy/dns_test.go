package netproxy

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// zone is the upstream the tests' DNS resolves from.
var zone = map[string][]netip.Addr{
	"pypi.org":               {netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8::10")},
	"files.pythonhosted.org": {netip.MustParseAddr("203.0.113.11")},
	"inward.pypi.org":        {netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("169.254.169.254")},
	"mixed.pypi.org":         {netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("203.0.113.12")},
	"v6only.pypi.org":        {netip.MustParseAddr("2001:db8::13")},
}

func lookupZone(_ context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range zone[host] {
		if (network == "ip4") == a.Is4() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// serveDNS serves d on a loopback UDP port and returns a query function.
func serveDNS(t *testing.T, d *DNS) func(name string, qtype uint16, edns bool) *dns.Msg {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: d, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return func(name string, qtype uint16, edns bool) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		if edns {
			m.SetEdns0(1232, false)
		}
		resp, _, err := new(dns.Client).Exchange(m, pc.LocalAddr().String())
		if err != nil {
			t.Fatalf("query %s: %v", name, err)
		}
		return resp
	}
}

func TestDNS(t *testing.T) {
	policy, err := netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"pypi.org", "*.pypi.org"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []Event
	query := serveDNS(t, &DNS{
		Policy:  func() *netpolicy.Checker { return policy },
		Lookup:  lookupZone,
		Refused: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
	})
	answers := func(m *dns.Msg) string {
		var s []string
		for _, rr := range m.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				s = append(s, rr.A.String())
			case *dns.AAAA:
				s = append(s, rr.AAAA.String())
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  string
	}{
		{"pypi.org", dns.TypeA, dns.RcodeSuccess, "203.0.113.10"},
		{"PyPI.org", dns.TypeAAAA, dns.RcodeSuccess, "2001:db8::10"},
		{"pypi.org", dns.TypeMX, dns.RcodeSuccess, ""},
		// Only the public half of a mixed answer.
		{"mixed.pypi.org", dns.TypeA, dns.RcodeSuccess, "203.0.113.12"},
		// A name with addresses of the other family only: no data, not NXDOMAIN.
		{"v6only.pypi.org", dns.TypeA, dns.RcodeSuccess, ""},
		{"nosuch.pypi.org", dns.TypeA, dns.RcodeNameError, ""},
		// Refused: not in the allow-list; resolving only inward.
		{"files.pythonhosted.org", dns.TypeA, dns.RcodeNameError, ""},
		{"inward.pypi.org", dns.TypeA, dns.RcodeNameError, ""},
	} {
		resp := query(tc.name, tc.qtype, false)
		if resp.Rcode != tc.rcode || answers(resp) != tc.want {
			t.Errorf("%s %s: %s %q, want %s %q", dns.TypeToString[tc.qtype], tc.name, dns.RcodeToString[resp.Rcode], answers(resp), dns.RcodeToString[tc.rcode], tc.want)
		}
	}
	mu.Lock()
	if len(events) != 2 || events[0].Dest != "files.pythonhosted.org" || events[0].Rule != "mode" || !strings.Contains(events[0].Reason, "not in the allow-list") ||
		events[1].Dest != "inward.pypi.org" || events[1].Rule != "always" || events[1].Kind != "dns" || events[1].Time.IsZero() {
		t.Errorf("events: %+v", events)
	}
	mu.Unlock()

	// An EDNS client hears why.
	resp := query("files.pythonhosted.org", dns.TypeA, true)
	opt := resp.IsEdns0()
	if opt == nil || len(opt.Option) != 1 {
		t.Fatalf("an EDNS refusal has no extended error: %v", resp)
	}
	if ede, ok := opt.Option[0].(*dns.EDNS0_EDE); !ok || ede.InfoCode != dns.ExtendedErrorCodeProhibited || !strings.Contains(ede.ExtraText, "allow-list") {
		t.Errorf("extended error: %v", opt.Option[0])
	}

	// A sandbox with IPv4 only hears no IPv6 addresses.
	v4 := serveDNS(t, &DNS{Policy: func() *netpolicy.Checker { return policy }, Lookup: lookupZone, IPv4Only: true})
	if resp := v4("pypi.org", dns.TypeAAAA, false); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 {
		t.Errorf("AAAA with IPv4 only: %v", resp)
	}
	if resp := v4("pypi.org", dns.TypeA, false); answers(resp) != "203.0.113.10" {
		t.Errorf("A with IPv4 only: %v", resp)
	}
}

func TestDNSNone(t *testing.T) {
	policy, err := netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.None})
	if err != nil {
		t.Fatal(err)
	}
	looked := false
	query := serveDNS(t, &DNS{
		Policy: func() *netpolicy.Checker { return policy },
		Lookup: func(ctx context.Context, n, h string) ([]netip.Addr, error) {
			looked = true
			return lookupZone(ctx, n, h)
		},
	})
	if resp := query("pypi.org", dns.TypeA, false); resp.Rcode != dns.RcodeNameError || len(resp.Answer) != 0 {
		t.Errorf("mode none: %v", resp)
	}
	if looked {
		t.Error("mode none looked the name up")
	}
}
