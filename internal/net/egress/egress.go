// Package egress is a small, strict HTTP forward proxy: it lets a program
// inside a sandbox reach a short list of hosts, and nothing else.
//
// Why it exists: a template build runs steps such as `npm install -g deno
// bun` inside a sandbox whose network namespace has only loopback. The
// daemon opens a listener inside that namespace (127.0.0.1:3128 there),
// serves a Proxy on it and tells the step `https_proxy=http://127.0.0.1:3128`.
// The listener's socket lives in the sandbox's namespace, but the proxy
// dials from the daemon's, so the step gets out only through the proxy, and
// only to the destinations the proxy allows.
//
// What it checks, in order, for every connection it makes:
//
//  1. the destination "host:port" is in Allow (exactly, or under a
//     "*.domain" wildcard); IP literals only if written literally in Allow;
//  2. the host resolves, and only the addresses that pass AllowIP (by
//     default Outward: no loopback, private, link-local, cloud-metadata or
//     host network addresses) are dialled, so that a name in Allow whose
//     DNS points inward cannot be used to reach the host's own network.
//
// Two kinds of request are served: CONNECT host:port, which becomes a byte
// tunnel (how HTTPS goes through a proxy), and plain-HTTP requests with an
// absolute URL (GET http://host/path), which are forwarded one at a time.
// Anything else is answered 400.
//
// Request headers and bodies are never logged: they may carry tokens.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy is an HTTP forward proxy that lets through only connections to the
// hosts it allows, at addresses AllowIP accepts. Set its fields before
// serving it and do not change them afterwards. Its zero value allows
// nothing.
//
// A Proxy can be served by Serve, which also ends its tunnels when asked to
// stop, or used as an http.Handler in a server of the caller's own; a
// tunnel then lasts until one side closes it or the request's context
// ends (for a hijacked connection, that is the server's BaseContext).
type Proxy struct {
	// Allow lists "host:port" destinations clients may reach, e.g.
	// "registry.npmjs.org:443". A host may be a wildcard
	// "*.example.org:443" matching any subdomain (not example.org itself).
	// Host names are matched without regard to case; an IP literal
	// ("127.0.0.1:8080", "[::1]:8080") matches only that address.
	Allow []string
	// AllowIP decides whether a resolved address may be dialled; nil means
	// Outward.
	AllowIP func(netip.Addr) bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// DialTimeout bounds each dial, and also the name lookup before it
	// (default 10 s).
	DialTimeout time.Duration
	// Logger may be nil (discard). Each refused request is logged at Info
	// with its destination and the reason, each tunnel at Debug.
	Logger *slog.Logger
}

// defaultDialTimeout is DialTimeout when it is zero.
const defaultDialTimeout = 10 * time.Second

// Attribute keys for logs.
const (
	attrDest   = "dest" // "host:port" the client asked for
	attrReason = "reason"
)

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.serveConnect(w, r)
	case r.URL.IsAbs():
		p.serveForward(w, r)
	default:
		p.reject(w, http.StatusBadRequest, r.URL.Host, "not a proxy request",
			"egress proxy: this is a forward proxy; send CONNECT host:port, or a request for an absolute http:// URL")
	}
}

// Serve serves the proxy on ln until ln is closed or ctx ends; it then
// closes ln and every open tunnel and returns once all handlers have
// returned. Either way of stopping returns nil; any other error from
// accepting connections is returned. An entry of Allow that is not
// "host:port" is reported before anything is served (ln is closed then
// too).
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if err := p.checkAllow(); err != nil {
		ln.Close()
		return err
	}

	// Every request's context derives from ctx (BaseContext), so cancelling
	// it ends every tunnel: each one closes its connections when its
	// request's context ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var handlers handlerGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !handlers.enter() {
				http.Error(w, "egress proxy: shutting down", http.StatusServiceUnavailable)
				return
			}
			defer handlers.leave()
			p.ServeHTTP(w, r)
		}),
		BaseContext: func(net.Listener) context.Context { return ctx },
		// A client that never finishes its request headers, or keeps an
		// idle connection open, must not hold a goroutine forever.
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.log().Handler(), slog.LevelWarn),
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
	stopped := false
	select {
	case err = <-served: // ln was closed, or accepting failed
	case <-ctx.Done():
		stopped = true
	}
	cancel()    // end every tunnel
	srv.Close() // close ln and every connection not taken over by a tunnel
	if stopped {
		err = <-served // http.ErrServerClosed
	}
	handlers.closeAndWait()

	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("serve egress proxy: %w", err)
}

// handlerGroup counts the handlers Serve has running so that it can wait
// for them; once closed, it admits no more. (A bare sync.WaitGroup would
// not do: its Add must not race with Wait, and a request may arrive while
// Serve is stopping.)
type handlerGroup struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter reports whether a handler may run; if so, it must call leave.
func (g *handlerGroup) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

func (g *handlerGroup) leave() { g.wg.Done() }

// closeAndWait admits no more handlers and waits for the running ones.
func (g *handlerGroup) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// serveConnect answers CONNECT host:port: it dials the destination and,
// once connected, turns the client's connection into a tunnel to it.
func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	// For CONNECT, the URL is just the authority the client asked for.
	host, port, err := net.SplitHostPort(r.URL.Host)
	if err != nil {
		p.reject(w, http.StatusBadRequest, r.URL.Host, "no port",
			fmt.Sprintf("egress proxy: CONNECT needs host:port, for example registry.npmjs.org:443; got %q", r.URL.Host))
		return
	}
	d, err := newDest(host, port)
	if err != nil {
		p.reject(w, http.StatusBadRequest, r.URL.Host, "malformed destination", "egress proxy: "+err.Error())
		return
	}

	upstream, err := p.dial(r.Context(), d)
	if err != nil {
		p.fail(w, d, err)
		return
	}
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		p.log().Warn("egress tunnel: hijack client connection", attrDest, d, "error", err)
		http.Error(w, "egress proxy: cannot take over this connection for a tunnel (is it HTTP/1.1?)", http.StatusInternalServerError)
		return
	}
	p.tunnel(r.Context(), d, client, buffered.Reader, upstream)
}

// tunnel copies bytes both ways between client and upstream until both
// directions have ended or ctx ends, then closes both connections.
// buffered holds what the client sent after its CONNECT request that the
// HTTP server had already read; it goes to upstream first.
func (p *Proxy) tunnel(ctx context.Context, d dest, client net.Conn, buffered *bufio.Reader, upstream net.Conn) {
	defer client.Close()
	defer upstream.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var early int64
	if n := buffered.Buffered(); n > 0 {
		head, _ := buffered.Peek(n) // cannot fail: n bytes are buffered
		m, err := upstream.Write(head)
		early = int64(m)
		if err != nil {
			return
		}
	}

	began := time.Now()
	p.log().Debug("egress tunnel open", attrDest, d, "addr", upstream.RemoteAddr().String())
	up, down := early, int64(0)
	Splice(ctx, client, upstream, func(isUp bool, n int64) {
		if isUp {
			up += n
		} else {
			down = n
		}
	})
	p.log().Debug("egress tunnel closed", attrDest, d, "bytes_up", up, "bytes_down", down,
		"duration", time.Since(began).Round(time.Millisecond))
}

// Splice copies bytes both ways between client and upstream until both
// directions have ended or ctx ends, then closes both connections. As each
// direction ends, ended (if not nil) hears which one (up: client to
// upstream) and how many bytes it carried.
//
// After a clean end of one direction's input it shuts only the other
// side's write half, so that the peer sees end-of-stream while the other
// direction carries on (a client may send its whole request, half-close,
// and still read the answer). After an error, or where a side cannot
// half-close, it closes both connections, which also ends the other
// direction.
func Splice(ctx context.Context, client, upstream net.Conn, ended func(up bool, n int64)) {
	closeBoth := sync.OnceFunc(func() {
		client.Close()
		upstream.Close()
	})
	stop := context.AfterFunc(ctx, closeBoth)
	defer func() {
		stop()
		closeBoth()
	}()
	if ended == nil {
		ended = func(bool, int64) {}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		n, err := io.Copy(upstream, client)
		ended(true, n)
		endDirection(upstream, err, closeBoth)
	})
	wg.Go(func() {
		n, err := io.Copy(client, upstream)
		ended(false, n)
		endDirection(client, err, closeBoth)
	})
	wg.Wait()
}

// endDirection ends one direction of a splice, whose copy into dst has
// returned err (see Splice).
func endDirection(dst net.Conn, err error, closeBoth func()) {
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		if cw.CloseWrite() == nil {
			return
		}
	}
	closeBoth()
}

// hopByHop are the headers that concern one connection, not the request:
// a proxy must not pass them on (RFC 9110 section 7.6.1). Proxy-
// Authorization also keeps a client's proxy credentials from leaking to
// the destination.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate",
	"Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// serveForward forwards a plain-HTTP request for an absolute URL and
// streams the response back.
func (p *Proxy) serveForward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		p.reject(w, http.StatusBadRequest, r.URL.Host, "scheme "+r.URL.Scheme,
			fmt.Sprintf("egress proxy: only http:// URLs are forwarded; for %s:// use CONNECT host:port", r.URL.Scheme))
		return
	}
	port := r.URL.Port()
	if port == "" {
		port = "80"
	}
	d, err := newDest(r.URL.Hostname(), port)
	if err != nil {
		p.reject(w, http.StatusBadRequest, r.URL.Host, "malformed destination", "egress proxy: "+err.Error())
		return
	}
	// Checked here for a clear 403 before anything else happens; the
	// transport's dial checks again, with the addresses.
	if !p.allowed(d) {
		p.fail(w, d, p.notAllowed(d))
		return
	}

	out := r.Clone(r.Context())
	out.RequestURI = "" // set only on requests a server received
	out.Close = false
	removeHopByHop(out.Header)

	// A transport per request, without keep-alive, leaves no idle
	// connection (and no goroutine) behind. Plain HTTP is rare here:
	// package registries are HTTPS, which goes through CONNECT.
	transport := &http.Transport{
		Proxy: nil, // never pass on to another proxy, whatever the environment says
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			d, err := newDest(host, port)
			if err != nil {
				return nil, err
			}
			return p.dial(ctx, d)
		},
		DisableKeepAlives:  true,
		DisableCompression: true, // pass the body on as the server sent it
	}
	resp, err := transport.RoundTrip(out)
	if err != nil {
		p.fail(w, d, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Upgrade was removed from the request, so this is unexpected.
		p.fail(w, d, errors.New("the server switched protocols, which this proxy does not support"))
		return
	}

	removeHopByHop(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	// An error here is the client or the server going away mid-body;
	// nothing can be said to the client any more.
	n, err := io.Copy(w, resp.Body)
	p.log().Debug("egress forward", attrDest, d, "method", r.Method, "status", resp.StatusCode,
		"bytes", n, "error", err)
}

// removeHopByHop deletes the hop-by-hop headers from h, including any
// that its Connection header names.
func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// dest is a destination a client asked for: host lower-cased (and an IP
// literal in its canonical form), port a number.
type dest struct {
	host string
	port uint16
}

func (d dest) String() string {
	return net.JoinHostPort(d.host, strconv.Itoa(int(d.port)))
}

// newDest checks and normalises a host and port as a client gave them.
func newDest(host, port string) (dest, error) {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return dest{}, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	host = strings.ToLower(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	} else if !ValidHostname(host) {
		return dest{}, fmt.Errorf("%q is not a valid host name (letters, digits, '-' and '_' in dot-separated labels, no trailing dot)", host)
	}
	return dest{host: host, port: uint16(n)}, nil
}

// ValidHostname reports whether s, already lower-cased, is a DNS name made
// of labels of 1 to 63 letters, digits, '-' or '_'. Anything stranger never
// reaches the resolver.
func ValidHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}

// pattern is one parsed entry of Allow.
type pattern struct {
	host     string // the host, or for a wildcard the suffix with its dot (".example.org")
	wildcard bool
	port     uint16
}

// parsePattern parses an entry of Allow.
func parsePattern(entry string) (pattern, error) {
	host, port, err := net.SplitHostPort(entry)
	if err != nil {
		return pattern{}, fmt.Errorf("allow entry %q: want host:port, for example registry.npmjs.org:443 or *.example.org:443", entry)
	}
	suffix, wildcard := strings.CutPrefix(host, "*.")
	if wildcard {
		host = suffix
	}
	d, err := newDest(host, port)
	if err != nil {
		return pattern{}, fmt.Errorf("allow entry %q: %w", entry, err)
	}
	if wildcard {
		if _, err := netip.ParseAddr(d.host); err == nil {
			return pattern{}, fmt.Errorf("allow entry %q: a wildcard needs a domain name after \"*.\", not an address", entry)
		}
		return pattern{host: "." + d.host, wildcard: true, port: d.port}, nil
	}
	return pattern{host: d.host, port: d.port}, nil
}

// matches reports whether d is one of the destinations pt allows.
func (pt pattern) matches(d dest) bool {
	if pt.port != d.port {
		return false
	}
	if !pt.wildcard {
		return pt.host == d.host
	}
	// A subdomain: something non-empty, then the suffix with its leading
	// dot, so "evilexample.org" does not match "*.example.org". An address
	// is never a subdomain.
	if _, err := netip.ParseAddr(d.host); err == nil {
		return false
	}
	return len(d.host) > len(pt.host) && strings.HasSuffix(d.host, pt.host)
}

// allowed reports whether d matches an entry of Allow. An entry that does
// not parse matches nothing (Serve reports it before serving).
func (p *Proxy) allowed(d dest) bool {
	for _, entry := range p.Allow {
		if pt, err := parsePattern(entry); err == nil && pt.matches(d) {
			return true
		}
	}
	return false
}

// checkAllow reports every entry of Allow that does not parse.
func (p *Proxy) checkAllow() error {
	var errs []error
	for _, entry := range p.Allow {
		if _, err := parsePattern(entry); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// refusal is the proxy's own decision not to connect, as opposed to a
// connection that failed; it is answered 403 Forbidden.
type refusal struct {
	dest   dest
	reason string // short, for the log
	msg    string // for the client
}

func (e *refusal) Error() string { return e.msg }

func (p *Proxy) notAllowed(d dest) *refusal {
	list := "none"
	if len(p.Allow) > 0 {
		list = strings.Join(p.Allow, ", ")
	}
	return &refusal{dest: d, reason: "not in allow list",
		msg: fmt.Sprintf("egress proxy: %s is not allowed; the only destinations allowed are: %s", d, list)}
}

// dial connects to d if Allow allows it: it resolves d's host, keeps the
// addresses AllowIP accepts and tries them in order until one connects.
func (p *Proxy) dial(ctx context.Context, d dest) (net.Conn, error) {
	if !p.allowed(d) {
		return nil, p.notAllowed(d)
	}
	addrs, err := p.resolve(ctx, d.host)
	if err != nil {
		return nil, err
	}
	allowIP := p.AllowIP
	if allowIP == nil {
		allowIP = Outward
	}
	var ok []netip.Addr
	for _, a := range addrs {
		if allowIP(a) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		return nil, &refusal{dest: d, reason: "inward address",
			msg: fmt.Sprintf("egress proxy: %s resolves only to addresses of the host's own or private networks (%s), which this proxy does not dial", d, joinAddrs(addrs))}
	}

	dialer := net.Dialer{Timeout: p.dialTimeout()}
	var errs []error
	for _, a := range ok {
		conn, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, d.port).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connect to %s: %w", d, errors.Join(errs...))
}

// resolve returns host's addresses, IPv4 ones in their 4-byte form. An IP
// literal is its own address.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	resolver := p.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout())
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap() // the resolver may give IPv4 as ::ffff:a.b.c.d
	}
	return addrs, nil
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// fail answers a request whose connection to d was refused (403) or
// failed (502), and logs it.
func (p *Proxy) fail(w http.ResponseWriter, d dest, err error) {
	if ref, ok := errors.AsType[*refusal](err); ok {
		p.reject(w, http.StatusForbidden, ref.dest.String(), ref.reason, ref.msg)
		return
	}
	p.log().Info("egress connection failed", attrDest, d, "error", err)
	http.Error(w, oneLine("egress proxy: "+err.Error()), http.StatusBadGateway)
}

// reject answers a request the proxy refuses with status and a one-line
// message, and logs it at Info.
func (p *Proxy) reject(w http.ResponseWriter, status int, dest, reason, msg string) {
	p.log().Info("egress request refused", attrDest, dest, attrReason, reason)
	http.Error(w, oneLine(msg), status)
}

// oneLine turns a multi-line message (errors.Join makes those) into one.
func oneLine(s string) string {
	return strings.ReplaceAll(s, "\n", "; ")
}

func (p *Proxy) dialTimeout() time.Duration {
	if p.DialTimeout > 0 {
		return p.DialTimeout
	}
	return defaultDialTimeout
}

func (p *Proxy) log() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Address ranges that lead inward, or nowhere (IANA's special-purpose
// registries, RFC 6890 and later). IPv4-mapped IPv6 addresses are judged as
// the IPv4 address they carry.
//
// The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32) are not among them: they lead nowhere on the internet,
// and some networks use them for real hosts (the machines Hutch's CI runs
// on reach their package mirrors at such addresses). Where the host itself
// is on one, Outward refuses it as one of the host's networks.
var (
	nonPublicV4 = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),      // "this network", incl. the unspecified 0.0.0.0
		netip.MustParsePrefix("10.0.0.0/8"),     // private, RFC 1918
		netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT, RFC 6598
		netip.MustParsePrefix("127.0.0.0/8"),    // loopback
		netip.MustParsePrefix("169.254.0.0/16"), // link-local, incl. 169.254.169.254 cloud metadata
		netip.MustParsePrefix("172.16.0.0/12"),  // private, RFC 1918
		netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
		netip.MustParsePrefix("192.88.99.0/24"), // deprecated 6to4 relay anycast
		netip.MustParsePrefix("192.168.0.0/16"), // private, RFC 1918
		netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
		netip.MustParsePrefix("224.0.0.0/4"),    // multicast
		netip.MustParsePrefix("240.0.0.0/4"),    // reserved, incl. broadcast 255.255.255.255
	}
	// globalV6 is where IPv6 global unicast addresses are allocated from;
	// everything outside it (loopback, unspecified, fc00::/7 unique local,
	// fe80::/10 link-local, ff00::/8 multicast, ...) is not outside.
	globalV6    = netip.MustParsePrefix("2000::/3")
	nonPublicV6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"), // IETF protocol assignments, incl. Teredo and benchmarking
	}
	// Prefixes whose addresses carry an IPv4 address that decides.
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix: the last 4 bytes
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4: bytes 2 to 5
)

// Outward is the default for Proxy.AllowIP: addr is an OutsideIP, and not
// on any network the host has an address on (its own subnet's neighbours,
// its gateway).
func Outward(addr netip.Addr) bool {
	if !OutsideIP(addr) {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false // the host's networks are unknown: refuse
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ones, _ := n.Mask.Size()
			ip, ok := netip.AddrFromSlice(n.IP)
			if ok && netip.PrefixFrom(ip.Unmap(), ones).Masked().Contains(addr.Unmap()) {
				return false
			}
		}
	}
	return true
}

// OutsideIP reports whether addr is a unicast address that does not lead
// inward: not loopback, private (RFC 1918, fc00::/7), link-local (incl.
// 169.254.169.254 cloud metadata), CGNAT 100.64.0.0/10, unspecified,
// multicast, broadcast, 0.0.0.0/8, IPv4-mapped forms of those, etc.
//
// IPv6 addresses that embed an IPv4 address (NAT64 64:ff9b::/96, 6to4
// 2002::/16) are outside only if the embedded address is. An address with
// a zone never is.
func OutsideIP(addr netip.Addr) bool {
	if !addr.IsValid() || addr.Zone() != "" {
		return false
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return !inAny(addr, nonPublicV4)
	}
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		return OutsideIP(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(addr):
		return OutsideIP(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return globalV6.Contains(addr) && !inAny(addr, nonPublicV6)
}

func inAny(addr netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
