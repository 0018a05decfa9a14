// Package nettest makes a small "internet" for tests of sandboxes'
// network, in a network namespace the test owns: hosts at public-looking
// test addresses (TEST-NET-2 and -3) serving HTTP, HTTPS (with a test CA)
// and a plain TCP echo, a host at a private address, and a DNS server
// answering for all of them. A daemon under test (or a benchmark's) is
// pointed at it (hutch serve --network-netns Internet.Netns --network-dns
// Internet.DNS): nothing leaves the host.
package nettest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"

	"github.com/hutchdev/hutch/internal/net/sandboxnet"
)

// The hosts of the test internet, by name. Each serves HTTP on 80 and
// HTTPS on 443 ("hello from NAME\n"), and echoes plain TCP on 7000.
var Hosts = map[string]netip.Addr{
	"allowed.test": netip.MustParseAddr("203.0.113.10"),
	"other.test":   netip.MustParseAddr("203.0.113.20"),
	"cdn.test":     netip.MustParseAddr("198.51.100.30"),
	// A name whose address is private: what no sandbox may reach, even
	// when its policy names it.
	"private.test": netip.MustParseAddr("10.77.0.5"),
}

// dnsAddr is where the test internet's DNS server answers.
var dnsAddr = netip.MustParseAddr("198.51.100.53")

// Internet is a running test internet.
type Internet struct {
	// Netns is the path of its network namespace.
	Netns string
	// DNS is its DNS server, host:port.
	DNS string
	// CA is the PEM of the CA its HTTPS certificates are signed by.
	CA []byte
	// BigSize is the size of GET /big on every host's HTTP.
	BigSize int64

	mu       sync.Mutex
	requests []Request // what the hosts were sent (see Requests)

	closers []io.Closer
	wg      sync.WaitGroup
}

// Start makes a test internet for t; t's cleanup removes it.
func Start(t *testing.T) *Internet {
	t.Helper()
	in, err := New(filepath.Join(t.TempDir(), "internet"))
	if err != nil {
		t.Fatalf("test internet: %v", err)
	}
	t.Cleanup(func() {
		if err := in.Close(); err != nil {
			t.Errorf("remove test internet: %v", err)
		}
	})
	return in
}

// New makes a test internet whose namespace is kept at path; Close
// removes it.
func New(path string) (in *Internet, err error) {
	in = &Internet{Netns: path, DNS: net.JoinHostPort(dnsAddr.String(), "53"), BigSize: 256 << 20}
	if err := sandboxnet.NewNamespace(in.Netns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// The hosts' addresses are the namespace's own, on loopback (a
		// dummy link needs a module the host may lack): the daemon
		// connects from this namespace, so they are local to it.
		addrs := []netip.Addr{dnsAddr}
		for _, a := range Hosts {
			addrs = append(addrs, a)
		}
		for _, a := range addrs {
			if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
				return fmt.Errorf("address %s: %w", a, err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, in.Close())
		}
	}()
	ca, certs, err := makeCerts()
	if err != nil {
		return in, err
	}
	in.CA = ca
	for name, addr := range Hosts {
		srv := &http.Server{Handler: in.record(name, hostHandler(name, in.BigSize)), ReadHeaderTimeout: 10 * time.Second}
		in.closers = append(in.closers, srv)
		for _, port := range []string{"80", "443", "7000"} {
			ln, err := in.listen(net.JoinHostPort(addr.String(), port))
			if err != nil {
				return in, err
			}
			switch port {
			case "80":
				in.wg.Go(func() { _ = srv.Serve(ln) })
			case "443":
				tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{certs}, MinVersion: tls.VersionTLS12})
				in.wg.Go(func() { _ = srv.Serve(tl) })
			default:
				in.wg.Go(func() { serveEcho(ln) })
			}
		}
	}
	var udp net.PacketConn
	if err := sandboxnet.InNetns(in.Netns, func() (err error) {
		udp, err = net.ListenPacket("udp", in.DNS)
		return err
	}); err != nil {
		return in, fmt.Errorf("DNS: %w", err)
	}
	started := make(chan struct{})
	dnsServer := &dns.Server{PacketConn: udp, Handler: dns.HandlerFunc(answer), NotifyStartedFunc: func() { close(started) }}
	in.wg.Go(func() { _ = dnsServer.ActivateAndServe() })
	<-started
	in.closers = append(in.closers, closerFunc(dnsServer.Shutdown))
	return in, nil
}

// Serve serves h on HTTP at addr (one of Hosts' addresses, a port of the
// test's) in the test internet, until Close: a host of the test's own
// (a webhook's receiver).
func (in *Internet) Serve(addr string, h http.Handler) error {
	ln, err := in.listen(addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	in.closers = append(in.closers, srv)
	in.wg.Go(func() { _ = srv.Serve(ln) })
	return nil
}

// listen opens a TCP listener at addr in the test internet.
func (in *Internet) listen(addr string) (ln net.Listener, err error) {
	err = sandboxnet.InNetns(in.Netns, func() error {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	in.closers = append(in.closers, ln)
	return ln, nil
}

// Close stops the servers and removes the namespace.
func (in *Internet) Close() error {
	var errs []error
	for _, c := range in.closers {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	in.wg.Wait()
	return errors.Join(append(errs, sandboxnet.RemoveNamespace(in.Netns))...)
}

// Dial connects to addr from inside the test internet (as a check of it).
func (in *Internet) Dial(ctx context.Context, addr string) (conn net.Conn, err error) {
	err = sandboxnet.InNetns(in.Netns, func() error {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// hostHandler answers a host's HTTP: "hello from NAME" at any path but
// /big, which sends size bytes.
// Request is a request a host of the test internet was sent, as it
// arrived: what a test checks a sandbox's request became on the way.
type Request struct {
	Host   string // the host's name
	TLS    bool
	Method string
	URL    string // the request's target (path and query)
	Header http.Header
}

// maxRequests bounds what Requests keeps: the latest.
const maxRequests = 1000

// record keeps each request host name is sent.
func (in *Internet) record(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.mu.Lock()
		if len(in.requests) == maxRequests {
			in.requests = in.requests[1:]
		}
		in.requests = append(in.requests, Request{Host: name, TLS: r.TLS != nil, Method: r.Method, URL: r.URL.RequestURI(), Header: r.Header.Clone()})
		in.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// Requests returns the requests the hosts were sent, oldest first.
func (in *Internet) Requests() []Request {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.requests)
}

func hostHandler(name string, size int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			_, _ = io.CopyN(w, zeros{}, size)
			return
		}
		_, _ = fmt.Fprintf(w, "hello from %s\n", name)
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// serveEcho echoes what each connection sends, after "echo\n".
func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if _, err := c.Write([]byte("echo\n")); err == nil {
				_, _ = io.Copy(c, c)
			}
		}()
	}
}

// answer is the test internet's DNS: A records of Hosts, nothing else.
func answer(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	for _, q := range req.Question {
		name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
		addr, ok := Hosts[name]
		if !ok {
			resp.Rcode = dns.RcodeNameError
			continue
		}
		if q.Qtype == dns.TypeA {
			resp.Answer = append(resp.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   addr.AsSlice(),
			})
		}
	}
	_ = w.WriteMsg(resp)
}

// makeCerts makes a CA and a certificate it signs for every host name.
func makeCerts() (caPEM []byte, leaf tls.Certificate, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, leaf, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Hutch test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, leaf, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, leaf, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, leaf, err
	}
	var names []string
	for name := range Hosts {
		names = append(names, name)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test hosts"}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, leaf, err
	}
	if len(der) == 0 {
		return nil, leaf, errors.New("empty certificate")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
