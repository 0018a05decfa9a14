package mitm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/net/egress"
)

// How a request goes on.
//
// The request is read with http.ReadRequest and written anew by hand, not
// with Request.Write, which would add a User-Agent the client did not
// send and rebuild the target from the parsed URL. What is written is:
// the request line with the client's own method, target (with the query
// swapped, if asked) and HTTP version; Host first; every header as parsed
// (values swapped), hop-by-hop ones included, since the two connections
// are one to one and the client's Connection, Upgrade, Expect and TE mean
// for the host what they meant for the daemon; and the framing as parsed:
// Content-Length when the body has one, or Transfer-Encoding: chunked
// (which net/http's parser has already preferred over, and removed, any
// Content-Length) with a Trailer line for the declared trailers.
//
// The body is sent by another goroutine while the response is awaited, so
// that Expect: 100-continue works (the host's 100 reaches the client,
// which then sends the body) and so that a host may answer before it has
// read the whole body. Each piece read goes out at once, framed again
// (chunked bodies are chunked anew, trailers after them), so that nothing
// is held whole.
//
// Responses are written back the same way: status line as received,
// headers as parsed, framing as parsed (a HEAD's, 204's or 304's
// Content-Length kept, with no body), 1xx interim responses passed on as
// they come, each piece of a body flushed as it arrives, so that a stream
// of events reaches the client event by event. A body that ends with the
// connection (neither length nor chunked) is passed on the same way, and
// the connection closed after it.

// forward sends req to the host and its response back. It reports
// whether the connection is to end after it.
func (s *session) forward(req *http.Request) (last bool, err error) {
	if status, why := s.check(req); status != 0 {
		s.answer(status, why)
		return true, fmt.Errorf("request refused (%d): %s", status, why)
	}
	if s.route != nil {
		if status, text := s.route(req); status != 0 {
			s.answerText(status, text)
			return true, fmt.Errorf("request refused (%d) by the policy", status)
		}
	}
	target, swapped, err := s.swapIn(req)
	if err != nil {
		s.answer(http.StatusRequestHeaderFieldsTooLarge, err.Error())
		return true, err
	}
	if err := writeHead(s.uw, requestLine(req, target), req.Header, req.TransferEncoding, req.Trailer, false); err != nil {
		s.closeConns()
		return true, fmt.Errorf("send request to %s: %w", s.host, err)
	}

	// The body goes while the response is awaited. On failure it closes
	// the host's connection, which ends the wait for the response.
	var sending sync.WaitGroup
	var bodyErr error
	if req.Body != nil && req.Body != http.NoBody {
		sending.Go(func() {
			if bodyErr = copyBody(s.uw, s.piecesOf(), req.Body, chunked(req.TransferEncoding), func() http.Header { return req.Trailer }); bodyErr != nil {
				_ = s.upRaw.Close()
			}
		})
	}
	defer sending.Wait()

	var resp *http.Response
	for {
		s.ul.bound(maxResponseHead)
		resp, err = http.ReadResponse(s.ur, req)
		s.ul.unbound()
		if err != nil {
			return true, s.noResponse(&sending, err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return true, s.switchProtocols(req, resp, &sending, &bodyErr)
		}
		if resp.StatusCode >= 200 {
			break
		}
		// 100 Continue, 103 Early Hints: passed on, and the final
		// response still to come.
		s.scrubHead(resp)
		if err := writeHead(s.cw, statusLine(resp), resp.Header, nil, nil, false); err != nil {
			s.closeConns()
			return true, fmt.Errorf("send response to the sandbox: %w", err)
		}
	}
	s.log.Debug("egress request intercepted", attrHost, s.host, attrMethod, req.Method,
		attrStatus, resp.StatusCode, attrSwapped, swapped)

	s.scrubHead(resp)
	s.scrubBody(req, resp)
	if err := writeHead(s.cw, statusLine(resp), resp.Header, resp.TransferEncoding, resp.Trailer, resp.Close); err != nil {
		s.closeConns()
		return true, fmt.Errorf("send response to the sandbox: %w", err)
	}
	if s.clientRaw != nil && resp.ContentLength > 0 && len(resp.TransferEncoding) == 0 && resp.Body != nil && resp.Body != http.NoBody {
		if err := s.spliceBody(resp.ContentLength); err != nil {
			s.closeConns() // the sandbox must see the body cut short
			return true, fmt.Errorf("response from %s: %w", s.host, err)
		}
	} else if resp.Body != nil && resp.Body != http.NoBody {
		trailer := func() http.Header { s.scrubHeader(resp.Trailer); return resp.Trailer }
		if err := copyBody(s.cw, s.piecesOf(), resp.Body, chunked(resp.TransferEncoding), trailer); err != nil {
			s.closeConns() // the sandbox must see the body cut short
			return true, fmt.Errorf("response from %s: %w", s.host, err)
		}
	}
	if req.Close || resp.Close {
		_ = closeWrite(s.client) // a body that ends with the connection ends here
		s.closeConns()
		return true, nil
	}
	// A client that sent Expect: 100-continue and got a final status
	// instead sends its body anyway or closes; either ends the wait.
	sending.Wait()
	if bodyErr != nil {
		s.closeConns()
		return true, fmt.Errorf("send request body to %s: %w", s.host, bodyErr)
	}
	return false, nil
}

// noResponse ends a request the host gave no response to (err). A host
// that closed or reset the connection has the sandbox's closed too, as the
// sandbox would have seen it alone (its client may then retry on a new
// connection); a malformed response is answered 502.
func (s *session) noResponse(sending *sync.WaitGroup, err error) error {
	_ = s.upRaw.Close()
	err = fmt.Errorf("read response from %s: %w", s.host, scrub(err))
	if isIOError(err) {
		s.closeConns()
		sending.Wait()
		return err
	}
	// A body still being read from the sandbox (one that waits for a
	// 100 Continue, say) stops at a deadline in the past.
	_ = s.client.SetReadDeadline(time.Unix(1, 0))
	sending.Wait()
	_ = s.client.SetReadDeadline(time.Time{})
	s.answer(http.StatusBadGateway, s.host+" sent a response that is not valid HTTP/1.1")
	return err
}

// switchProtocols passes a 101 on, then splices the connections: from
// here on, bytes go both ways as they are, without swapping.
func (s *session) switchProtocols(req *http.Request, resp *http.Response, sending *sync.WaitGroup, bodyErr *error) error {
	if req.Header.Get("Upgrade") == "" {
		s.closeConns()
		return fmt.Errorf("%s switched protocols unasked", s.host)
	}
	s.scrubHead(resp)
	if err := writeHead(s.cw, statusLine(resp), resp.Header, nil, nil, false); err != nil {
		s.closeConns()
		return fmt.Errorf("send response to the sandbox: %w", err)
	}
	sending.Wait()
	if *bodyErr != nil {
		s.closeConns()
		return fmt.Errorf("send request body to %s: %w", s.host, *bodyErr)
	}
	s.log.Debug("egress request intercepted", attrHost, s.host, attrMethod, req.Method,
		attrStatus, resp.StatusCode)
	// What either side sent after the switch may already be buffered.
	egress.Splice(s.ctx, bufferedConn{s.client, s.cr}, bufferedConn{s.up, s.ur}, nil)
	return nil
}

// check refuses what is not to be forwarded on this connection: it
// returns the status to answer and why, or 0. On a relayed connection
// route decides the host afterwards.
func (s *session) check(req *http.Request) (int, string) {
	switch {
	case req.ProtoMajor != 1:
		return http.StatusHTTPVersionNotSupported, "only HTTP/1.1 is served on this connection"
	case req.Method == http.MethodConnect && s.route != nil:
		return http.StatusBadRequest, "CONNECT is not served: this connection goes to the host it names, not to a proxy"
	case req.Method == http.MethodConnect:
		return http.StatusBadRequest, "CONNECT is not served inside a TLS connection"
	case req.Method == http.MethodTrace && s.route == nil:
		return http.StatusMethodNotAllowed, "TRACE is refused on a connection that carries secrets: the host would echo them"
	case !strings.HasPrefix(req.RequestURI, "/") && !(req.RequestURI == "*" && req.Method == http.MethodOptions) && !(s.route != nil && absoluteHTTP(req)):
		return http.StatusBadRequest, "the request target must be a path (origin-form), such as /v1/models"
	case req.Host == "":
		return http.StatusBadRequest, "the request has no Host header"
	case s.route == nil && !sameHost(req.Host, s.host):
		return http.StatusMisdirectedRequest, "the request's Host header names another host than " + s.host + ", which this connection is for"
	}
	return 0, ""
}

// absoluteHTTP reports whether req's target is an absolute http:// URL
// (absolute-form, which servers must take): its authority is then req.Host,
// and the Host header the client sent is replaced by it.
func absoluteHTTP(req *http.Request) bool {
	return req.URL != nil && strings.EqualFold(req.URL.Scheme, "http") && req.URL.Host != ""
}

// sameHost reports whether a Host header's value names host, with or
// without a port.
func sameHost(value, host string) bool {
	name := value
	if i := strings.LastIndexByte(value, ':'); i >= 0 {
		port := value[i+1:]
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return false
		}
		name = value[:i]
	}
	return strings.EqualFold(strings.TrimSuffix(name, "."), host)
}

func requestLine(req *http.Request, target string) string {
	return fmt.Sprintf("%s %s HTTP/%d.%d", req.Method, target, req.ProtoMajor, req.ProtoMinor) + "\r\nHost: " + req.Host
}

func statusLine(resp *http.Response) string {
	return fmt.Sprintf("HTTP/%d.%d %s", resp.ProtoMajor, resp.ProtoMinor, resp.Status)
}

// writeHead writes a message's head and flushes it: first (the request
// or status line, with Host for a request), the headers, then the
// framing: chunked with its declared trailers, and Connection: close when
// closing and the headers do not say so already (net/http's parser drops
// a response's "Connection: close").
func writeHead(w *bufio.Writer, first string, h http.Header, te []string, trailer http.Header, closing bool) error {
	_, _ = w.WriteString(first)
	_, _ = w.WriteString("\r\n")
	if err := h.Write(w); err != nil {
		return err
	}
	if closing && !hasToken(h.Values("Connection"), "close") {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	if chunked(te) {
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
		var keys []string
		for k := range trailer {
			if validToken(k) {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			_, _ = w.WriteString("Trailer: " + strings.Join(keys, ", ") + "\r\n")
		}
	}
	_, _ = w.WriteString("\r\n")
	return w.Flush()
}

// copyBody sends a body from r to w as it comes, in pieces of pool's
// buffers, each piece flushed:
// chunked anew (then the trailer) if chunked, as it is otherwise. An
// error says whether reading or writing failed; a read error is scrubbed.
func copyBody(w *bufio.Writer, pool *sync.Pool, r io.Reader, chunked bool, trailer func() http.Header) error {
	buf := pool.Get().(*[]byte)
	defer pool.Put(buf)
	for {
		n, rerr := r.Read(*buf)
		if n > 0 {
			if chunked {
				_, _ = fmt.Fprintf(w, "%x\r\n", n)
			}
			_, _ = w.Write((*buf)[:n])
			if chunked {
				_, _ = w.WriteString("\r\n")
			}
			if err := w.Flush(); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read: %w", scrub(rerr))
		}
	}
	if chunked {
		_, _ = w.WriteString("0\r\n")
		if t := trailer(); t != nil {
			if err := t.Write(w); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		_, _ = w.WriteString("\r\n")
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// pieces are an intercepted connection's pieces; relayPieces a relayed
// one's (see relayPiece).
var (
	pieces      = sync.Pool{New: func() any { b := make([]byte, piece); return &b }}
	relayPieces = sync.Pool{New: func() any { b := make([]byte, relayPiece); return &b }}
)

// piecesOf is where s's body pieces come from.
func (s *session) piecesOf() *sync.Pool {
	if s.route != nil {
		return &relayPieces
	}
	return &pieces
}

func chunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// hasToken reports whether a comma-separated header's values hold token.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// validToken reports whether s is a header field name (an RFC 9110
// token).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
