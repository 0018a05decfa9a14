// Package mitm puts proxy secrets into a sandbox's HTTPS requests inside
// the daemon, so that the secret itself never enters the sandbox.
//
// A secret with inject proxy reaches a sandbox as a placeholder in its
// variable (hutch-secret-NAME-<24 hex digits>). When the sandbox opens a
// TLS connection to one of the secret's hosts, netproxy, which every
// connection of a sandbox goes through, hands it to an Interceptor instead
// of splicing it. The Interceptor ends TLS itself, with a certificate for
// that host from the daemon's own CA (which sandboxes trust), reads each
// HTTP/1.1 request, puts the value in place of the placeholder in the
// headers that carry credentials (and, for a secret that asks for it, in
// the query string), and sends the request on over its own TLS connection
// to the host, verified as any client verifies it. Responses go back with
// the value, in any of the forms internal/base/redact knows, put back
// to the placeholder.
//
// What this protects. The value is never in the sandbox: not in its
// environment, memory or files, nor in the bytes it sends. Code there that
// prints the variable, or sends it to any other host, shows only the
// placeholder. Only connections to the secret's hosts are intercepted
// (netproxy picks them by the name the connection is for), and the value
// goes only to that host: the daemon resolves the name and dials the
// address itself, so the sandbox cannot pair the name with an address of
// its choosing; the host's certificate is verified for that name against
// the daemon's roots, which the sandbox cannot choose nor stand in for;
// and each request's Host header must name the same host (421 otherwise),
// so that a front end shared by many sites (a CDN) cannot be asked to
// route the request, and the value, to another of its sites (domain
// fronting). The CA's key stays in the daemon (a 0600 file); its
// certificates are trusted only inside sandboxes.
//
// Where a value goes. A placeholder is swapped only in Authorization and
// Proxy-Authorization (inside a basic credential too), and in a header
// whose name ends in Key, Token, Secret or Apikey (X-Api-Key, Api-Key,
// X-Goog-Api-Key, DD-API-KEY, Private-Token, X-Auth-Token): where APIs
// take credentials, and where hosts do not echo what they were sent, as
// they may a User-Agent, a Referer or a header of the client's choosing.
// Elsewhere a placeholder is left as it is (and logged at Warn, once a
// connection, with the header's name), so that the sandbox cannot ask a
// host to reflect the value by writing its placeholder in such a header.
// (Secrets do not name their header: these are where every API this was
// tried with takes one.)
//
// Revocation. The secrets to swap are looked up again for every request
// (the caller's lookup; the daemon's answers from its vault, whose
// changes it hears at once): a secret deleted is swapped no more, and one
// given a new value is swapped with it, from the next request on, on
// connections already open too.
//
// What comes back. A host that sends back what it was sent would give the
// value to the sandbox: a redirect that carries it, a header or an error
// that reflects it. Every response's status line, headers and trailers,
// and its body, have every value sent on the connection, in the forms
// redaction knows (raw, URL-escaped, base64, hex, JSON), replaced by its
// placeholder. A body so scrubbed may change length, so it goes on
// chunked (or, to an HTTP/1.0 client, ending with the connection); to get
// bodies the scrubber can read, requests that carry secrets are sent
// without Accept-Encoding, and a host that compresses anyway has its body
// passed on unscrubbed. TRACE, which exists to echo, is refused. Values
// shorter than redaction's MinLen are not scrubbed. Whoever may run code
// in the sandbox may use the secret on its hosts as its owner could (that
// is the point), but cannot take it away. Placeholders are swapped in
// request headers and query strings only: not in bodies, trailers, nor
// after a protocol switch (a WebSocket's 101 turns the connection into a
// byte splice, without swapping or scrubbing). Only HTTP/1.1 over TLS is
// served: ALPN offers http/1.1 alone, so a client that insists on h2 fails
// its handshake, and a client that pins its server's certificate refuses
// the CA's.
//
// Requests are parsed by net/http's strict parser (one Content-Length, or
// chunked, never both) and sent on framed anew from what it parsed, so the
// host sees exactly the requests that were swapped: no request can be
// smuggled past the swap to be read by the host as another. Bodies are
// streamed both ways and never held whole (an upload of a gigabyte passes
// through a few buffers of 16 KiB).
//
// The same request loop serves netproxy's plain-HTTP connections (Relay):
// without TLS and without secrets, each request decided by the sandbox's
// policy before it is sent on, so that a connection allowed for one host
// cannot carry requests for another.
//
// Header values, bodies and secret values are never logged nor put in an
// error; errors from parsing what a host sent are reduced to their kind,
// since a host may echo a value into them.
package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/redact"
)

// Interceptor serves the intercepted connections of a daemon. Set its
// fields before the first Serve and do not change them afterwards; Serve
// may be called for many connections at once.
type Interceptor struct {
	// CA issues the certificates shown to sandboxes.
	CA *CA
	// RootCAs verify hosts' certificates; nil means the system's roots.
	RootCAs *x509.CertPool
	// Log hears, at Debug, each request forwarded (method, status and how
	// many placeholders were swapped, never the target or a header), and
	// at Warn a secret whose value cannot go in a header. Nil: discard.
	Log *slog.Logger
}

// Limits and timeouts of a connection.
const (
	// handshakeTimeout bounds each TLS handshake.
	handshakeTimeout = 15 * time.Second
	// maxRequestHead bounds a request's head, as net/http's server does
	// by default.
	maxRequestHead = 1 << 20
	// maxResponseHead bounds a response's head, as net/http's client
	// does by default.
	maxResponseHead = 10 << 20
	// A body is read at most piece bytes at a time (a TLS record's
	// worth), and each piece goes out, framed, in one write of a writer
	// of writeBuf bytes. readBuf is each reader's buffer; it also bounds
	// a chunked body's trailer (net/http's parser peeks for its end).
	// An idle connection holds some 66 KiB of them.
	piece    = 16 << 10
	readBuf  = 16 << 10
	writeBuf = piece + 64
	// relayPiece is a relayed (plain HTTP) connection's piece: no TLS
	// record to match, and a read returns what has come, so a large
	// piece streams events as a small one does and moves bulk data in a
	// sixteenth of the system calls. A piece larger than the writer's
	// buffer goes out unbuffered, in one write.
	relayPiece = 256 << 10
	// firstRequestWait bounds the wait for the request a 502 answers
	// when the host could not be reached.
	firstRequestWait = 2 * time.Second
	// linger and lingerBytes bound what is read and dropped after an
	// error answer, so that closing does not reset the connection before
	// the client has read the answer.
	linger      = 500 * time.Millisecond
	lingerBytes = 256 << 10
)

// Attribute keys for logs.
const (
	attrHost        = "host"
	attrMethod      = "method"
	attrStatus      = "status"
	attrSwapped     = "swapped"
	attrPlaceholder = "placeholder"
	attrHeader      = "header"
)

// Serve intercepts one TLS connection the sandbox made to host, until
// either side ends it or ctx ends, and closes client and upstream before
// it returns.
//
// client is the sandbox's connection, of which head (the ClientHello, as
// netproxy's peek read it) was already read: Serve reads it again from
// head. host is the name in its SNI. upstream is a TCP connection to an
// address of host that the policy allowed: Serve sends no request on it
// before it has verified the host's certificate for host, and begins that
// handshake only once the sandbox's has succeeded. swaps are the
// secrets for host; a placeholder not among them is left as it is.
//
// The sandbox is shown a certificate for host from CA and offered
// http/1.1 only. Requests are served one after another: each is checked
// (origin-form target, Host naming host, not CONNECT nor TRACE; 400, 421,
// 405 or 505 otherwise), swapped, and sent on; its response is streamed
// back, scrubbed of the values sent. A 101 Switching Protocols turns the
// connection into a byte splice both ways, without any more swapping. When the host cannot be reached
// securely, the sandbox's first request is answered 502 Bad Gateway with
// the reason (no secret is in it), and nothing is sent to the host.
//
// count, if not nil, hears the bytes of the sandbox's connection as they
// pass, head included (out: from the sandbox; in: to it); it may be
// called from two goroutines at once.
//
// Serve returns nil when the connection ended as HTTP allows it to: the
// sandbox closed it between requests, either side asked to close, the
// host closed an idle connection (the sandbox's is closed then too, as the
// sandbox would have seen without the daemon between them), or ctx ended.
// Otherwise the error says what failed, for a log.
func (i *Interceptor) Serve(ctx context.Context, client net.Conn, head []byte, host string, upstream net.Conn, swaps func() []Swap, count func(out bool, n int64)) error {
	closeConns, stop := closeBoth(ctx, client, upstream)
	defer closeConns()
	defer stop()

	if i.CA == nil {
		return errors.New("intercept: no CA")
	}
	host = strings.ToLower(host)
	leaf, err := i.CA.Leaf(host) // checks that host is a host name
	if err != nil {
		return fmt.Errorf("intercept: %w", err)
	}
	if count != nil {
		count(true, int64(len(head)))
		client = &countingConn{Conn: client, count: count}
	}
	s := &session{
		ctx:        ctx,
		host:       host,
		log:        i.log(),
		swaps:      swaps,
		closeConns: closeConns,
		upRaw:      upstream,
	}
	if s.swaps == nil {
		s.swaps = func() []Swap { return nil }
	}
	sc := tls.Server(&replayConn{Conn: client, head: head}, &tls.Config{
		Certificates:           []tls.Certificate{*leaf},
		NextProtos:             []string{"http/1.1"},
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true, // a new config per connection: a ticket could never be used
	})
	s.setClient(sc)
	if err := handshake(ctx, sc); err != nil {
		return fmt.Errorf("intercept %s: TLS handshake with the sandbox: %w", host, err)
	}

	up := tls.Client(upstream, &tls.Config{
		ServerName: host,
		RootCAs:    i.RootCAs,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	s.setUp(up)
	if err := handshake(ctx, up); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		s.answerFirst(http.StatusBadGateway, "could not connect securely to "+host+": "+err.Error())
		return fmt.Errorf("intercept %s: TLS handshake with the host: %w", host, err)
	}
	if err := s.serve(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func (i *Interceptor) log() *slog.Logger {
	if i.Log != nil {
		return i.Log
	}
	return slog.New(slog.DiscardHandler)
}

func handshake(ctx context.Context, c *tls.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	return c.HandshakeContext(ctx)
}

// session is one intercepted (or relayed) connection: the sandbox's side
// (client) and the host's (up), each with its buffered reader and writer.
//
// Who uses what: the serving goroutine reads requests from cr and
// responses from ur and writes responses to cw; while a request's body is
// sent, another goroutine reads cr and writes uw; while the sandbox's
// next request is awaited, another goroutine watches ur.
type session struct {
	ctx  context.Context
	host string // the host, or for a relayed connection where it goes
	log  *slog.Logger

	// swaps returns the secrets to swap in now (intercepted
	// connections); nil on a relayed one.
	swaps func() []Swap
	// route decides each request of a relayed connection: 0 to send it
	// on, or the status to answer and the answer's text; nil on an
	// intercepted one, whose requests must name host.
	route func(*http.Request) (int, string)
	// sent are the swaps whose values went on this connection, by
	// value; scrub puts their placeholders back in what comes back.
	sent  map[string]Swap
	scrub *redact.Set
	// warned are the placeholders and headers already warned of.
	warned map[string]bool

	client net.Conn // a *tls.Conn, or a relayed TCP connection
	cl     *headLimit
	cr     *bufio.Reader
	cw     *bufio.Writer

	up    net.Conn
	upRaw net.Conn
	// clientRaw is a relayed connection's sandbox side unwrapped, and
	// count what its bytes are told to (spliceBody); nil otherwise.
	clientRaw net.Conn
	count     func(out bool, n int64)
	ul        *headLimit
	ur        *bufio.Reader
	uw        *bufio.Writer

	closeConns func() // closes both connections, at once
}

// setClient makes c the sandbox's side.
func (s *session) setClient(c net.Conn) {
	s.client = c
	s.cl = &headLimit{r: c}
	s.cr = bufio.NewReaderSize(s.cl, readBuf)
	s.cw = bufio.NewWriterSize(c, writeBuf)
}

// setUp makes c the host's side.
func (s *session) setUp(c net.Conn) {
	s.up = c
	s.ul = &headLimit{r: c}
	s.ur = bufio.NewReaderSize(s.ul, readBuf)
	s.uw = bufio.NewWriterSize(c, writeBuf)
}

// serve serves requests until the connection ends.
func (s *session) serve() error {
	for {
		req, err := s.next()
		if req == nil {
			return err
		}
		last, err := s.forward(req)
		if err != nil || last {
			return err
		}
	}
}

// next reads the sandbox's next request while it watches the host's
// connection: a host that closes an idle connection, or sends anything
// out of turn, has both connections closed, as the sandbox would have
// seen it without the daemon between them. It returns a nil request when
// there is none to serve, with the reason (nil for an ordinary end).
func (s *session) next() (*http.Request, error) {
	watched := make(chan error, 1)
	go func() {
		_, err := s.ur.Peek(1)
		if !isTimeout(err) {
			s.closeConns()
		}
		watched <- err
	}()
	s.cl.bound(maxRequestHead)
	req, err := http.ReadRequest(s.cr)
	tooLarge := s.cl.reached
	s.cl.unbound()
	// Stop the watch: a deadline in the past ends its read, and leaves
	// the TLS connection and its reader usable.
	_ = s.up.SetReadDeadline(time.Unix(1, 0))
	werr := <-watched
	_ = s.up.SetReadDeadline(time.Time{})

	switch {
	case !isTimeout(werr):
		return nil, nil // the host ended it (or ctx did)
	case err == nil:
		return req, nil
	case tooLarge:
		s.answer(http.StatusRequestHeaderFieldsTooLarge, "the request's head is larger than 1 MiB")
		return nil, errors.New("read request: head too large")
	case errors.Is(err, io.EOF):
		return nil, nil // closed between requests
	case isIOError(err):
		return nil, fmt.Errorf("read request: %w", err)
	}
	s.answer(http.StatusBadRequest, "the request is not valid HTTP/1.1")
	return nil, errors.New("read request: malformed")
}

// answer sends the sandbox an error response with msg, then ends the
// connection: it tells TLS it writes no more, and reads and drops what
// the sandbox still sends for a moment, so that the close does not reset
// the connection before the answer is read. No request body may be being
// read.
func (s *session) answer(status int, msg string) {
	s.answerText(status, "hutch: "+strings.ReplaceAll(msg, "\n", "; ")+"\n")
}

// answerText is answer with the body's text as it is.
func (s *session) answerText(status int, body string) {
	_, _ = fmt.Fprintf(s.cw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if s.cw.Flush() != nil {
		return
	}
	_ = closeWrite(s.client)
	s.cl.unbound()
	_ = s.client.SetReadDeadline(time.Now().Add(linger))
	_, _ = io.CopyN(io.Discard, s.cr, lingerBytes)
}

// answerFirst reads the sandbox's first request's head (waiting a little
// for it) and answers it: a response sent before the request would be
// taken by some clients for a broken connection.
func (s *session) answerFirst(status int, msg string) {
	_ = s.client.SetReadDeadline(time.Now().Add(firstRequestWait))
	s.cl.bound(maxRequestHead)
	_, _ = http.ReadRequest(s.cr) // its body, if any, is dropped by answer
	s.cl.unbound()
	_ = s.client.SetReadDeadline(time.Time{})
	s.answer(status, msg)
}

// isIOError reports whether err is the connection's failing (closed,
// reset, cut short, timed out), as opposed to what was read being
// malformed. Such errors carry nothing that was read.
func isIOError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// errMalformed stands for a parse error, whose text may quote what the
// host sent.
var errMalformed = errors.New("malformed HTTP")

// scrub keeps an I/O error and reduces any other to errMalformed.
func scrub(err error) error {
	if err == nil || isIOError(err) {
		return err
	}
	return errMalformed
}

// closeBoth returns what closes client and upstream, once, and closes them
// when ctx ends until stop is called.
func closeBoth(ctx context.Context, client, upstream net.Conn) (closeConns func(), stop func() bool) {
	closeConns = sync.OnceFunc(func() {
		_ = client.Close()
		_ = upstream.Close()
	})
	return closeConns, context.AfterFunc(ctx, closeConns)
}
