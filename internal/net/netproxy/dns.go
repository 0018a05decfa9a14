package netproxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// Event is a refusal the daemon made for a sandbox: a DNS question, a TCP
// connection or a UDP datagram it did not let through, and why.
type Event struct {
	Time time.Time `json:"time"`
	// Kind is "dns", "tcp" or "udp".
	Kind string `json:"kind"`
	// Dest is what the sandbox asked for: a name, "name:port (address)",
	// or "address:port".
	Dest string `json:"dest"`
	// Rule is the rule that refused (as written), "mode" for what the
	// sandbox's mode leaves out, or "always" for what no policy allows.
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// Line is the refusal as a command's result tells it to a model:
// "blocked_by_policy: " and the reason, led by the destination.
func (ev Event) Line() string {
	if strings.HasPrefix(ev.Reason, ev.Dest) {
		return "blocked_by_policy: " + ev.Reason
	}
	return "blocked_by_policy: " + ev.Dest + ": " + ev.Reason
}

// DNS answers a sandbox's DNS questions under its policy: A and AAAA
// questions for names the policy lets it look up get the addresses the
// daemon resolves, less those no sandbox may reach; every other name is
// answered NXDOMAIN, with the reason as an Extended DNS Error (RFC 8914)
// for a client that asked with EDNS, and an Event. Other question types
// get an empty answer: what a sandbox needs of DNS is where to connect,
// and the daemon decides that again at the connection.
type DNS struct {
	// Policy returns the sandbox's policy now (it may change while the
	// sandbox runs).
	Policy func() *netpolicy.Checker
	// Lookup resolves host for network "ip4" or "ip6" (the daemon's
	// resolver: net.DefaultResolver.LookupNetIP).
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Refused hears each refusal.
	Refused func(Event)
	// Logged hears of each A question, allowed or refused; nil: none.
	Logged func(Entry)
	// Inward decides which answers are dropped; netpolicy.Inward if nil.
	Inward func(netip.Addr) bool
	// IPv4Only answers AAAA questions with no data: a sandbox with no IPv6
	// route would try the addresses first and fail (see sandboxnet).
	IPv4Only bool
}

// answerTTL is the TTL of answers: short, since the daemon resolves the
// name again for each connection.
const answerTTL = 30

// lookupTimeout bounds one upstream lookup.
const lookupTimeout = 5 * time.Second

// ServeDNS answers one query (dns.Handler).
func (d *DNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 || req.Question[0].Qclass != dns.ClassINET {
		resp.SetRcode(req, dns.RcodeNotImplemented)
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	decision := d.Policy().Name(name)
	if !decision.Allowed {
		d.refuse(w, req, resp, Event{Kind: "dns", Dest: name, Rule: decision.Rule, Reason: decision.Reason})
		return
	}
	refused := false // and logged so by refuse
	if q.Qtype == dns.TypeA && d.Logged != nil {
		defer func() {
			if refused {
				return
			}
			e := Entry{Kind: "dns", Name: name, Allowed: true, Rule: decision.Rule}
			for _, rr := range resp.Answer {
				if a, ok := rr.(*dns.A); ok {
					e.Addr = a.A.String()
					break
				}
			}
			if resp.Rcode != dns.RcodeSuccess {
				e.Reason = "allowed, but it did not resolve: " + dns.RcodeToString[resp.Rcode]
			}
			d.Logged(e)
		}()
	}
	network := map[uint16]string{dns.TypeA: "ip4", dns.TypeAAAA: "ip6"}[q.Qtype]
	if network == "" || network == "ip6" && d.IPv4Only {
		_ = w.WriteMsg(resp) // no data of this type
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	addrs, err := d.Lookup(ctx, network, name)
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		// No such name, or none of this family: NXDOMAIN only if the
		// name has no address at all.
		if _, other := d.Lookup(ctx, map[string]string{"ip4": "ip6", "ip6": "ip4"}[network], name); other != nil {
			resp.SetRcode(req, dns.RcodeNameError)
		}
		_ = w.WriteMsg(resp)
		return
	case err != nil:
		resp.SetRcode(req, dns.RcodeServerFailure)
		_ = w.WriteMsg(resp)
		return
	}
	inward := d.Inward
	if inward == nil {
		inward = netpolicy.Inward
	}
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: answerTTL}
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case inward(a):
		case q.Qtype == dns.TypeA && a.Is4():
			resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case q.Qtype == dns.TypeAAAA && a.Is6():
			resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	if len(addrs) > 0 && len(resp.Answer) == 0 {
		refused = true
		d.refuse(w, req, resp, Event{Kind: "dns", Dest: name, Rule: "always",
			Reason: name + " resolves only to addresses no sandbox may reach (private, loopback, link-local or the host's)"})
		return
	}
	_ = w.WriteMsg(resp)
}

// refuse tells Refused, then answers NXDOMAIN, with ev's reason for an
// EDNS client.
func (d *DNS) refuse(w dns.ResponseWriter, req, resp *dns.Msg, ev Event) {
	resp.SetRcode(req, dns.RcodeNameError)
	resp.Answer = nil
	if opt := req.IsEdns0(); opt != nil {
		resp.SetEdns0(opt.UDPSize(), false)
		out := resp.IsEdns0()
		out.Option = append(out.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited, ExtraText: ev.Reason})
	}
	if d.Refused != nil {
		ev.Time = time.Now().UTC()
		d.Refused(ev) // before the sandbox hears of it
	}
	if d.Logged != nil {
		d.Logged(Entry{Time: ev.Time, Kind: "dns", Name: ev.Dest, Rule: ev.Rule, Reason: ev.Reason})
	}
	_ = w.WriteMsg(resp)
}
