package api

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// What one caller may ask of the API, so that no client (a buggy loop, a
// slow or hostile one) takes the daemon from the others: every request is
// bounded in size, in how slowly its body may come, and per key in rate
// and in streams held open. Each limit answers with its own error, saying
// which limit and what to do. The root-only unix socket, the operator's
// own, has no rate or stream limit.

// Limits are the per-key limits (Config.Limits). Zero fields take their
// defaults (DefaultLimits); a negative Rate or Streams means none.
type Limits struct {
	// Rate is how many requests a second a key may make on average, and
	// Burst how many it may make at once above that.
	Rate  float64
	Burst int
	// Streams is how many streams (SSE answers and WebSockets) a key may
	// hold open at once.
	Streams int
	// bodyGrace and minBodyRate bound the pace of request bodies (see
	// boundedBody); tests shorten them.
	bodyGrace   time.Duration
	minBodyRate float64
}

// DefaultLimits are far above what one product's backend makes of a
// daemon on one host (the soak's 50 clients make a few hundred requests
// a second), and low enough that a runaway loop does not starve others.
var DefaultLimits = Limits{Rate: 1000, Burst: 2000, Streams: 256}

func (l Limits) withDefaults() Limits {
	if l.Rate == 0 {
		l.Rate = DefaultLimits.Rate
	}
	if l.Burst == 0 {
		l.Burst = max(DefaultLimits.Burst, int(math.Ceil(l.Rate)))
	}
	if l.Streams == 0 {
		l.Streams = DefaultLimits.Streams
	}
	if l.bodyGrace == 0 {
		l.bodyGrace = 10 * time.Second
	}
	if l.minBodyRate == 0 {
		l.minBodyRate = 16 << 10
	}
	return l
}

// Bounds of every request's size.
const (
	// maxURL bounds a request's URL (path and query).
	maxURL = 8 << 10
	// maxHeaders bounds a request's header fields, names and values
	// together. The server refuses far larger ones itself (MaxHeaderBytes)
	// before a handler sees them.
	maxHeaders = 64 << 10
	// MaxHeaderBytes is what the daemon's servers read of a request's
	// header at most.
	MaxHeaderBytes = 256 << 10
)

// Bounds of request bodies of files (see maxBodyOf).
const (
	// maxFileBody bounds one file written or uploaded in one request; a
	// sandbox's disk limit is the tighter bound of most.
	maxFileBody = 8 << 30
	// maxImportBody bounds a template archive.
	maxImportBody = 32 << 30
)

// limiter holds each key's rate and open streams.
type limiter struct {
	limits Limits
	mu     sync.Mutex
	keys   map[string]*keyUse
}

type keyUse struct {
	rate    *rate.Limiter
	streams int
}

func newLimiter(l Limits) *limiter {
	return &limiter{limits: l.withDefaults(), keys: map[string]*keyUse{}}
}

func (l *limiter) use(key string) *keyUse {
	u, ok := l.keys[key]
	if !ok {
		lim := rate.Inf
		if l.limits.Rate > 0 {
			lim = rate.Limit(l.limits.Rate)
		}
		u = &keyUse{rate: rate.NewLimiter(lim, l.limits.Burst)}
		l.keys[key] = u
	}
	return u
}

// allow takes one request of key's rate; when there is none, it says how
// long until there is.
func (l *limiter) allow(key string) (ok bool, retry time.Duration) {
	l.mu.Lock()
	u := l.use(key)
	l.mu.Unlock()
	r := u.rate.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// openStream counts a stream of key's; done uncounts it.
func (l *limiter) openStream(key string) (done func(), ok bool) {
	if l.limits.Streams < 0 {
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use(key)
	if u.streams >= l.limits.Streams {
		return nil, false
	}
	u.streams++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		u.streams--
		l.mu.Unlock()
	}), true
}

// isStream says whether a request asks for a stream: a WebSocket, or an
// answer of server-sent events.
func isStream(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" || acceptsEvents(r)
}

// checkSize refuses a request whose URL or headers are over their bounds.
func checkSize(r *http.Request) error {
	if n := len(r.RequestURI); n > maxURL {
		return errdefs.TooLarge("the request's URL is %d bytes, over the limit of %d: send long values in the body", n, maxURL)
	}
	n := 0
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	if n > maxHeaders {
		return errdefs.TooLarge("the request's headers are %d bytes, over the limit of %d", n, maxHeaders)
	}
	return nil
}

// limit applies the limits to a request of rt's before its handler: its
// caller's rate and streams (a key's; the unix socket's are not limited),
// its size, and its body's size and pace. It returns what to call when
// the request ends, or the error to answer with.
func (s *Server) limit(w http.ResponseWriter, r *http.Request, rt route, c caller, limited bool) (done func(), err error) {
	if err := checkSize(r); err != nil {
		return nil, err
	}
	done = func() {}
	if limited && !c.anonymous {
		key := c.key
		if c.admin {
			key = "the daemon's own key"
		}
		if ok, retry := s.limiter.allow(key); !ok {
			secs := max(1, int(math.Ceil(retry.Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			return nil, errdefs.RateLimited("key %s made more than its %g requests a second (bursts of %d); try again in %d s",
				orName(c.key), s.limiter.limits.Rate, s.limiter.limits.Burst, secs)
		}
		if isStream(r) {
			var ok bool
			if done, ok = s.limiter.openStream(key); !ok {
				return nil, errdefs.RateLimited("key %s holds %d streams open, its limit: close one (an event stream, a watch, a terminal) first",
					orName(c.key), s.limiter.limits.Streams)
			}
		}
	}
	if r.Body != nil && r.Body != http.NoBody && r.Header.Get("Upgrade") == "" {
		r.Body = s.newBoundedBody(w, r, rt)
	}
	return done, nil
}

func orName(key string) string {
	if key == "" {
		return "api.key"
	}
	return key
}

// boundedBody is a request body read within its route's size and at a
// pace: each read moves the connection's read deadline to what the bytes
// so far allow (a grace period, 10 s, then 16 KiB a second on average:
// one byte a second holds nothing past the grace), and the end of the
// body clears it, so that an answer streamed afterwards is not cut.
type boundedBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	began   time.Time
	read    int64
	limit   int64
	pattern string
	grace   time.Duration
	rate    float64 // bytes a second
	ended   bool
}

func (s *Server) newBoundedBody(w http.ResponseWriter, r *http.Request, rt route) *boundedBody {
	l := s.limiter.limits
	b := &boundedBody{body: r.Body, rc: http.NewResponseController(w), began: time.Now(), limit: maxBodyOf(rt.pattern),
		pattern: rt.pattern, grace: l.bodyGrace, rate: l.minBodyRate}
	b.extend()
	return b
}

func (b *boundedBody) extend() {
	allowed := b.grace + time.Duration(float64(b.read)/b.rate*float64(time.Second))
	_ = b.rc.SetReadDeadline(b.began.Add(allowed)) // a writer without deadlines (an in-process call's) is not bounded in pace
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.ended {
		return 0, io.EOF
	}
	if room := b.limit + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	switch {
	case b.read > b.limit:
		b.end()
		return n, errdefs.TooLarge("the request body is over %s, the limit of %s", byteSize(b.limit), b.pattern)
	case err == io.EOF:
		b.end()
	case err != nil && time.Since(b.began) > b.grace:
		return n, errdefs.InvalidArgument("the request body came slower than %g KiB/s after %s: the connection is closed (%v)", b.rate/1024, b.grace, err)
	default:
		b.extend()
	}
	return n, err
}

func (b *boundedBody) end() {
	if !b.ended {
		b.ended = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

func (b *boundedBody) Close() error { return b.body.Close() }

// byteSize says n bytes the way limits are written: in MiB or GiB.
func byteSize(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
