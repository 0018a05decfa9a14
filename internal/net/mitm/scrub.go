package mitm

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/hutchdev/hutch/internal/base/redact"
)

// What goes in and what comes back on an intercepted connection: the
// secrets of now swapped into each request, and every value sent on the
// connection put back to its placeholder in each response.

// swapIn swaps the secrets of now into req (see swapper.request): it
// looks them up, remembers their values for scrubbing what comes back,
// and tells the log, once a connection, of placeholders it cannot swap.
// It returns the target to send and how many placeholders it swapped. A
// relayed connection swaps nothing.
func (s *session) swapIn(req *http.Request) (string, int, error) {
	if s.swaps == nil {
		return req.RequestURI, 0, nil
	}
	list := s.swaps()
	sw := newSwapper(list)
	for _, p := range sw.unusable {
		if s.warnOnce("value " + p) {
			s.log.Warn("proxy secret's value has a control character and cannot go in a header: its placeholder is left as it is",
				attrHost, s.host, attrPlaceholder, p)
		}
	}
	for _, key := range misplaced(req.Header, list) {
		if s.warnOnce("header " + key) {
			s.log.Warn("a placeholder is in a header that carries no credential: it is left as it is (placeholders are swapped in Authorization and in headers whose name ends in Key, Token, Secret or Apikey)",
				attrHost, s.host, attrHeader, key)
		}
	}
	s.remember(list)
	if s.scrub.Len() > 0 {
		// What comes back is scrubbed: it must come readable.
		req.Header.Del("Accept-Encoding")
	}
	return sw.request(req, req.RequestURI)
}

// warnOnce reports whether what is to be warned of was not yet, on this
// connection.
func (s *session) warnOnce(what string) bool {
	if s.warned[what] {
		return false
	}
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[what] = true
	return true
}

// remember adds the values of swaps to those a response is scrubbed of.
// A value stays remembered after its secret is deleted or changed: a host
// may still send back what it was sent before.
func (s *session) remember(swaps []Swap) {
	changed := false
	for _, sw := range swaps {
		if sw.Placeholder == "" || sw.Value == sw.Placeholder {
			continue
		}
		if _, ok := s.sent[sw.Value]; ok {
			continue
		}
		if s.sent == nil {
			s.sent = map[string]Swap{}
		}
		s.sent[sw.Value] = sw
		changed = true
	}
	if !changed {
		return
	}
	set := make([]redact.Secret, 0, len(s.sent))
	for _, sw := range s.sent {
		set = append(set, redact.Secret{Name: sw.Placeholder, Value: sw.Value, Replacement: sw.Placeholder})
	}
	s.scrub = redact.NewSet(set)
}

// scrubHead puts placeholders back in a response's status line, headers
// and declared trailers.
func (s *session) scrubHead(resp *http.Response) {
	if s.scrub.Len() == 0 {
		return
	}
	resp.Status = s.scrub.String(resp.Status)
	s.scrubHeader(resp.Header)
	s.scrubHeader(resp.Trailer)
}

// scrubHeader puts placeholders back in h's names and values, in place.
func (s *session) scrubHeader(h http.Header) {
	if s.scrub.Len() == 0 {
		return
	}
	renamed := map[string][]string{}
	for key, vs := range h {
		for i := range vs {
			vs[i] = s.scrub.String(vs[i])
		}
		if k := s.scrub.String(key); k != key {
			delete(h, key)
			renamed[k] = append(renamed[k], vs...)
		}
	}
	for k, vs := range renamed {
		h[k] = append(h[k], vs...)
	}
}

// scrubBody makes resp's body come with placeholders put back, as it
// streams. The body may change length, so it goes on chunked (to an
// HTTP/1.0 client, ending with the connection). A body with a content
// coding (compressed although the request did not ask for it) cannot be
// read, and goes on as it came.
func (s *session) scrubBody(req *http.Request, resp *http.Response) {
	if s.scrub.Len() == 0 || resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return
	}
	resp.Body = &scrubReader{r: resp.Body, st: s.scrub.Stream()}
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	if req.ProtoAtLeast(1, 1) {
		resp.TransferEncoding = []string{"chunked"}
	} else {
		resp.TransferEncoding = nil
		resp.Close = true
	}
}

// scrubReader reads r through a redaction stream.
type scrubReader struct {
	r    io.ReadCloser
	st   *redact.Stream
	out  []byte // redacted, not yet read
	buf  []byte
	done bool
}

func (sr *scrubReader) Close() error { return sr.r.Close() }

func (sr *scrubReader) Read(p []byte) (int, error) {
	for len(sr.out) == 0 {
		if sr.done {
			return 0, io.EOF
		}
		if sr.buf == nil {
			sr.buf = make([]byte, piece)
		}
		n, err := sr.r.Read(sr.buf)
		sr.out = sr.st.Next(sr.buf[:n])
		if errors.Is(err, io.EOF) {
			sr.out = append(sr.out, sr.st.End()...)
			sr.done = true
		} else if err != nil {
			return 0, err
		}
	}
	n := copy(p, sr.out)
	sr.out = sr.out[n:]
	return n, nil
}
