package mitm

import (
	"context"
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
	}
	s.setClient(&replayConn{Conn: client, head: head})
	s.setUp(upstream)
	if err := s.serve(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
