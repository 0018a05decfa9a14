package netproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/net/egress"
	"github.com/hutchdev/hutch/internal/net/mitm"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
)

// Proxy serves the TCP connections of one sandbox, redirected to it: for
// each it learns the original destination (OriginalDst) and the host name
// the connection names (Peek), asks the policy, and connects in the
// sandbox's stead. A named connection goes to the addresses the daemon
// resolves for the name, never to the address the sandbox chose, so an
// allowed name cannot be paired with an address of the sandbox's choosing.
//
// What the policy decides is the connection's first name, except where
// the proxy reads more of it:
//
//   - plain HTTP is relayed request by request (mitm.Relay), each
//     request's Host decided by the policy as the first one was, so that
//     keep-alive cannot carry a request for a host the policy refuses to
//     a connection allowed for another;
//   - TLS to a host with proxy secrets is ended by the Interceptor, which
//     answers 421 to a request whose Host is not the SNI's name (no
//     domain fronting where secrets go);
//   - other TLS is spliced as it is, after its ClientHello's SNI was
//     decided: what the encrypted requests name the proxy cannot read.
//     Domain fronting behind an allowed name (an SNI the policy allows,
//     an inner Host of another site behind the same front end) reaches
//     what that front end serves under the allowed name's address: that
//     is the allowed name's owner's matter, and allowing a CDN's shared
//     name allows what the CDN fronts. Allow a site's own names.
type Proxy struct {
	// Policy returns the sandbox's policy now.
	Policy func() *netpolicy.Checker
	// OriginalDst returns where a redirected connection was going.
	OriginalDst func(net.Conn) (netip.AddrPort, error)
	// Lookup resolves a name for network "ip" (the daemon's resolver).
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Dial connects from the daemon (a net.Dialer's DialContext).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Refused hears each refusal.
	Refused func(Event)
	// Logged hears of each connection, allowed or refused, once it ended
	// (and each plain-HTTP request refused on an allowed one); nil: none.
	Logged func(Entry)
	// Swaps, when not nil, names the secrets to swap in on a TLS
	// connection to name:port; a connection that has some is served by
	// Interceptor (internal/net/mitm) instead of passed through, so
	// that the secrets' values reach only their hosts and never the
	// sandbox. It is asked again for every request on the connection, so
	// that a secret deleted or changed is swapped no more, or swapped
	// anew, at once: it should answer from memory.
	Swaps       func(name string, port uint16) []mitm.Swap
	Interceptor *mitm.Interceptor
	// Quiet is how long a connection may stay silent before it is taken
	// for a protocol where the server speaks first (default 1 s: a loaded
	// host's client took over 250 ms to send its request), unless its
	// address alone would be refused (then it gets slowClient). Connections
	// to the ports of such protocols (serverFirst) are not waited on.
	Quiet time.Duration

	// Counters, for the sandbox's stats.
	BytesOut, BytesIn atomic.Int64 // sandbox → destination, and back
	Connections       atomic.Int64 // connections made for it
}

// serverFirst are the ports of protocols where the server speaks first:
// FTP, SSH, SMTP (and submission), POP3, IMAP, MySQL. Their connections go
// by address at once, without waiting for the client's first bytes.
var serverFirst = map[uint16]bool{21: true, 22: true, 25: true, 110: true, 143: true, 587: true, 3306: true}

const (
	// dialTimeout bounds the connection to a destination, lookup
	// included.
	dialTimeout = 10 * time.Second
	// slowClient is how long a silent client is waited for when its
	// destination's address alone is refused: a server-first protocol
	// to such an address is refused after it rather than at once.
	slowClient = 10 * time.Second
)

// Serve accepts connections on ln until ctx ends or ln is closed, and waits
// for the connections it serves to end; they end when ctx does.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.serve(ctx, conn)
		}()
	}
}

// serve proxies one connection.
func (p *Proxy) serve(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	orig, err := p.OriginalDst(conn)
	if err != nil {
		return
	}
	quiet := p.Quiet
	if quiet == 0 {
		quiet = time.Second
	}
	sniff := Sniff{Protocol: TCP}
	if !serverFirst[orig.Port()] {
		if sniff, err = Peek(conn, quiet); err != nil {
			return
		}
		// Silence may be a slow client rather than a server-first
		// protocol: a loaded sandbox's TLS library loads its roots
		// before it sends its hello. Where the address alone would be
		// refused, refusing now would be final, so the client gets
		// longer to name its host.
		if sniff.silent() && mayName(p.Policy(), orig) {
			if sniff, err = Peek(conn, slowClient); err != nil {
				return
			}
		}
	}
	// A name that is an address names nothing the address does not.
	if _, err := netip.ParseAddr(sniff.Name); err == nil {
		sniff.Name = ""
	}
	began := time.Now().UTC()
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	up, addr, rule, refusal := p.connect(dctx, sniff.Name, orig)
	cancel()
	entry := Entry{Time: began, Kind: "tcp", Protocol: string(sniff.Protocol), Name: sniff.Name, Port: orig.Port(), Allowed: refusal == nil, Rule: rule}
	if refusal != nil {
		if sniff.Name == "" {
			entry.Addr = orig.Addr().String()
		}
		entry.Rule, entry.Reason = refusal.Rule, refusal.Reason
		p.log(entry)
		p.refuse(conn, sniff, *refusal)
		return
	}
	if up == nil {
		entry.Reason = "allowed, but no address it resolves to answered"
		p.log(entry)
		return // the client sees a close
	}
	defer up.Close()
	entry.Addr = addr.String()
	var sent, received atomic.Int64 // this connection's, for its entry
	defer func() {
		entry.BytesOut, entry.BytesIn = sent.Load(), received.Load()
		p.log(entry)
	}()
	p.Connections.Add(1)
	count := func(out bool, n int64) {
		if out {
			p.BytesOut.Add(n)
			sent.Add(n)
		} else {
			p.BytesIn.Add(n)
			received.Add(n)
		}
	}
	if swaps := p.swapsFor(sniff, orig.Port()); len(swaps) > 0 {
		// Errors end the connection; the client heard why, if it
		// could (a 502), and nothing of a secret is in them to log.
		lookup := func() []mitm.Swap { return p.Swaps(sniff.Name, orig.Port()) }
		_ = p.Interceptor.Serve(ctx, conn, sniff.Head, sniff.Name, up, lookup, count)
		return
	}
	if sniff.Protocol == HTTP {
		// As for the interceptor, errors end the connection and the
		// client heard why if it could.
		dest := netip.AddrPortFrom(addr, orig.Port())
		_ = mitm.Relay(ctx, conn, sniff.Head, dest.String(), up, p.route(dest), count, nil)
		return
	}
	if _, err := up.Write(sniff.Head); err != nil {
		return
	}
	count(true, int64(len(sniff.Head)))
	egress.Splice(ctx, conn, up, count)
}

// mayName reports whether naming a host could still get a connection to
// orig allowed: its address alone is refused, by a policy other than none.
func mayName(policy *netpolicy.Checker, orig netip.AddrPort) bool {
	return policy.Policy().Mode != netpolicy.None && !policy.Connect("", orig.Addr(), orig.Port()).Allowed
}

// swapsFor is what to swap in on a connection: only TLS to a name.
func (p *Proxy) swapsFor(sniff Sniff, port uint16) []mitm.Swap {
	if p.Swaps == nil || p.Interceptor == nil || sniff.Protocol != TLS || sniff.Name == "" {
		return nil
	}
	return p.Swaps(sniff.Name, port)
}

// connect dials where the connection may go: for a name, the addresses the
// daemon resolves that the policy allows; without one, the original
// destination if the policy allows it. It returns the connection, the
// address it went to and the rule that allowed it, the refusal when
// nothing is allowed, and no connection when what was allowed did not
// answer.
func (p *Proxy) connect(ctx context.Context, name string, orig netip.AddrPort) (net.Conn, netip.Addr, string, *Event) {
	policy := p.Policy()
	port := orig.Port()
	if name == "" {
		d := policy.Connect("", orig.Addr(), port)
		if !d.Allowed {
			return nil, netip.Addr{}, "", &Event{Kind: "tcp", Dest: orig.String(), Rule: d.Rule, Reason: d.Reason}
		}
		up, addr := p.dial(ctx, []netip.Addr{orig.Addr()}, port)
		return up, addr, d.Rule, nil
	}
	dest := net.JoinHostPort(name, strconv.Itoa(int(port)))
	if policy.Policy().Mode == netpolicy.None {
		d := policy.Name(name) // refused, without a lookup
		return nil, netip.Addr{}, "", &Event{Kind: "tcp", Dest: dest, Rule: d.Rule, Reason: d.Reason}
	}
	addrs, err := p.Lookup(ctx, "ip", name)
	if err != nil {
		return nil, netip.Addr{}, "", &Event{Kind: "tcp", Dest: dest, Rule: "always", Reason: fmt.Sprintf("%s: the daemon could not resolve %s", dest, name)}
	}
	var allowed []netip.Addr
	var first *netpolicy.Decision
	rule := ""
	for _, a := range addrs {
		d := policy.Connect(name, a, port)
		if d.Allowed {
			allowed = append(allowed, a)
			rule = cmp.Or(rule, d.Rule)
		} else if first == nil {
			first = &d
		}
	}
	if len(allowed) == 0 {
		if first == nil {
			return nil, netip.Addr{}, "", &Event{Kind: "tcp", Dest: dest, Rule: "always", Reason: dest + ": the name has no address"}
		}
		return nil, netip.Addr{}, "", &Event{Kind: "tcp", Dest: dest, Rule: first.Rule, Reason: first.Reason}
	}
	up, addr := p.dial(ctx, allowed, port)
	return up, addr, rule, nil
}

// dial tries addrs in order, and returns the connection and the address
// that answered; nil if none did.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, netip.Addr) {
	for _, a := range addrs {
		c, err := p.Dial(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, a
		}
	}
	return nil, netip.Addr{}
}

// route decides each request of a plain-HTTP connection that went to dest
// (mitm.Relay): by its Host, with the policy of now, as the connection's
// first request was decided, the address being the one dialled. A
// refusal is an event, and the client's 403 says why, as for a refused
// connection.
func (p *Proxy) route(dest netip.AddrPort) func(*http.Request) (int, string) {
	return func(req *http.Request) (int, string) {
		name := req.Host
		if h, _, err := net.SplitHostPort(name); err == nil {
			name = h
		}
		name = strings.ToLower(strings.Trim(name, "[]"))
		if _, err := netip.ParseAddr(name); err == nil {
			name = "" // an address names nothing the address does not
		}
		d := p.Policy().Connect(name, dest.Addr(), dest.Port())
		if d.Allowed {
			stripH2C(req.Header)
			return 0, ""
		}
		evDest := dest.String()
		if name != "" {
			evDest = net.JoinHostPort(name, strconv.Itoa(int(dest.Port())))
		}
		p.log(Entry{Kind: "tcp", Protocol: string(HTTP), Name: name, Addr: dest.Addr().String(), Port: dest.Port(), Rule: d.Rule, Reason: d.Reason})
		p.note(Event{Kind: "tcp", Dest: evDest, Rule: d.Rule, Reason: d.Reason})
		return http.StatusForbidden, "blocked_by_policy: " + d.Reason + "\n"
	}
}

// stripH2C drops an upgrade to cleartext HTTP/2 from a relayed request:
// its requests would go unread by route, each naming its own host. The
// server answers in HTTP/1.1, as it would to a client without h2c.
func stripH2C(h http.Header) {
	for _, v := range h.Values("Upgrade") {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "h2c") {
				h.Del("Upgrade")
				h.Del("Http2-Settings")
				return
			}
		}
	}
}

// log tells Logged of e.
func (p *Proxy) log(e Entry) {
	if p.Logged != nil {
		p.Logged(e)
	}
}

// note tells Refused of a refusal.
func (p *Proxy) note(ev Event) {
	ev.Time = time.Now().UTC()
	if p.Refused != nil {
		p.Refused(ev)
	}
}

// refuse tells the sandbox and Refused. An HTTP client gets a 403 whose
// body says why; any other connection is reset.
func (p *Proxy) refuse(conn net.Conn, sniff Sniff, ev Event) {
	p.note(ev)
	if sniff.Protocol == HTTP {
		body := "blocked_by_policy: " + ev.Reason + "\n"
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // a reset, at once
	}
}
