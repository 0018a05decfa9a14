package mitm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
)

// Relay serves a plain-HTTP connection the sandbox made to dest (the host
// and port it goes to, for errors and logs), until either side ends it or
// ctx ends, and closes client and upstream before it returns. It is
// Serve's request loop without TLS and without secrets: each request is
// read, checked (HTTP/1, not CONNECT, a path or an absolute http:// URL as
// its target, a Host; 505 or 400 otherwise), decided by route, and sent on
// framed anew, so that no request can be smuggled past route inside
// another's body; its response is streamed back as it came.
//
// route is asked for every request, not only the first: a connection the
// policy allowed for one host cannot carry a request for another (HTTP
// keep-alive lets a client name a new host on each request). It returns 0
// to send the request on, or the status to answer and the answer's text
// (the connection ends after it).
//
// client is the sandbox's connection, of which head (the start of the
// first request, as netproxy's peek read it) was already read; upstream
// is the connection to where it goes. count is as for Serve; log may be
// nil. Serve's notes on its return value hold here too.
func Relay(ctx context.Context, client net.Conn, head []byte, dest string, upstream net.Conn, route func(*http.Request) (int, string), count func(out bool, n int64), log *slog.Logger) error {
	closeConns, stop := closeBoth(ctx, client, upstream)
	defer closeConns()
	defer stop()

	raw := client
	if count != nil {
		count(true, int64(len(head)))
		client = &countingConn{Conn: client, count: count}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &session{
		ctx:        ctx,
		host:       dest,
		log:        log,
		route:      route,
		closeConns: closeConns,
		upRaw:      upstream,
		clientRaw:  raw,
		count:      count,
	}
	s.setClient(&replayConn{Conn: client, head: head})
	s.setUp(upstream)
	if err := s.serve(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// spliceBody passes a relayed response's body of n bytes on as it is, the
// head written: what the host's reader holds already, then the rest
// straight from the host's connection to the sandbox's, which the kernel
// moves itself (splice) when both are TCP connections. A relayed
// connection swaps and scrubs nothing, so nothing of the body needs
// reading; only its length, which keeps the next response in its place.
func (s *session) spliceBody(n int64) error {
	if err := s.cw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	held := min(int64(s.ur.Buffered()), n)
	if held > 0 {
		b, _ := s.ur.Peek(int(held)) // buffered: no error
		if _, err := s.clientRaw.Write(b); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		_, _ = s.ur.Discard(int(held))
	}
	moved, err := io.CopyN(s.clientRaw, s.upRaw, n-held)
	if s.count != nil {
		s.count(false, held+moved)
	}
	if err != nil {
		return fmt.Errorf("body cut short after %d of %d bytes: %w", held+moved, n, scrub(err))
	}
	return nil
}
