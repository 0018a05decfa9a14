// Package preview serves preview URLs: HTTP requests, and upgrades such as
// WebSocket's, for a TCP port of a sandbox. The daemon passes each request
// to the sandbox's agent, which connects to the port on the sandbox's
// loopback (see agentv1.TunnelPath): previews work whatever the sandbox's
// network, mode none included, and under either runtime.
//
// A request holds its sandbox running (the core's Acquire) until its
// answer has been sent, or, for an upgrade, until the upgraded connection
// ends: an open WebSocket or event stream is activity, and the sandbox is
// not idled under it. The connections kept to the sandbox between requests
// (keep-alive, see agentclient.Client.Ports) hold nothing. A request to a
// suspended or paused sandbox wakes it and is then served, once the port
// listens again (the services on it start again with the sandbox); a
// browser's page load that would wait longer than Config.WakePage is
// answered a small page that reloads itself, while the wake goes on. A
// request the port refuses while the service on it starts (just started
// or restarted: Target.Starting) waits for the port in the same way,
// rather than failing.
//
// Who may reach a preview is the API's business (internal/front/api): this
// package takes requests already let through. It strips what was meant
// for Hutch from them (Hutch-* headers, hutch_* cookies, hutch.*
// subprotocols, keys of Hutch's shape, and the Authorization header when
// it carried the API key), says where they came from (X-Forwarded-For,
// -Host and -Proto, and -Prefix for path routing), and streams bodies
// both ways without buffering them. A path-routed preview's answers are
// sandboxed in an origin of their own (see headers.go).
package preview

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
)

// Sandbox is a sandbox held running, as previews use it (a
// core.Running).
type Sandbox interface {
	// Ports carries requests for http://127.0.0.1:PORT/… to PORT on the
	// sandbox's loopback.
	Ports() http.RoundTripper
	// DialPort opens a stream to port on the sandbox's loopback.
	DialPort(ctx context.Context, port int) (net.Conn, error)
	// Err is what a request whose connection to the agent failed with err
	// returns (see core.Running.Err).
	Err(ctx context.Context, err error) error
	// Woken says the sandbox was started again to be held (see
	// core.Running.Woken): its ports may not listen yet.
	Woken() bool
}

// AcquireFunc holds sandbox id running, waking it if it is suspended or
// paused, until release is called.
type AcquireFunc func(ctx context.Context, id string) (sb Sandbox, release func(), err error)

// Core is the AcquireFunc of the lifecycle core's sandboxes.
func Core(m *core.Manager) AcquireFunc {
	return func(ctx context.Context, id string) (Sandbox, func(), error) {
		r, release, err := m.Acquire(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		return running{r}, release, nil
	}
}

type running struct{ *core.Running }

func (r running) Ports() http.RoundTripper { return r.Agent().Ports() }
func (r running) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return r.Agent().DialPort(ctx, port)
}

// Config configures a Proxy.
type Config struct {
	// Acquire holds the sandboxes requests go to (Core's, in the daemon).
	Acquire AcquireFunc
	// Domain is host routing's: {port}-{sandbox}.{Domain} (see Route).
	// Empty: no host routing.
	Domain string
	// WakePage is how long a browser's page load waits for its sandbox to
	// wake before the waking page answers it (default 1 s).
	WakePage time.Duration
	// ListenWait bounds how long requests wait, once their sandbox has
	// woken, for their port to listen (default 30 s).
	ListenWait time.Duration
	// Starting says whether a service on a sandbox's port is starting,
	// for the targets that do not say it themselves (Target.Starting): so
	// that every way into a preview (the E2B front, screenshots) waits
	// for a starting service. Nil: such targets never wait for one.
	Starting func(ctx context.Context, sandbox string, port int) bool
	// Logger gets what is worth knowing of failed requests; nil discards.
	Logger *slog.Logger
}

// Proxy passes preview requests on to sandboxes. It is safe for
// concurrent use.
type Proxy struct {
	cfg Config
	log *slog.Logger
	rp  *httputil.ReverseProxy

	mu       sync.Mutex
	starting map[portKey]chan struct{} // ports waited for: after a wake, or while their service starts
}

type portKey struct {
	sandbox string
	port    int
}

// New returns a Proxy.
func New(cfg Config) *Proxy {
	if cfg.WakePage <= 0 {
		cfg.WakePage = time.Second
	}
	if cfg.ListenWait <= 0 {
		cfg.ListenWait = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg, log: log, starting: map[portKey]chan struct{}{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      transport{},
		FlushInterval:  -1, // event streams and long polls get each write at once
		BufferPool:     bufferPool{},
		ModifyResponse: stripResponse,
		ErrorHandler:   p.failed,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p
}

// Target is where a preview request goes.
type Target struct {
	Sandbox string
	Port    int
	// Prefix is, with path routing, the start of the request's escaped
	// path that names the sandbox and port: it is taken off, and told in
	// X-Forwarded-Prefix. Empty with host routing.
	Prefix string
	// StripAuthorization removes the request's Authorization header: it
	// carried the API key.
	StripAuthorization bool
	// WaitForWake: the request is no person's page load, whatever it
	// asks for (a screenshot's): it waits for the wake, never answered the
	// waking page.
	WaitForWake bool
	// Starting says whether a service on the port is starting: its
	// process runs, and its port has not yet accepted a connection. A
	// request the port refuses then waits for it, as after a wake (see
	// Serve). It is asked only when the port refuses: it may cost a look
	// at the store and the sandbox. Nil: a refused request is answered at
	// once.
	Starting func(ctx context.Context) bool
}

// Serve passes r on to t, holding t's sandbox meanwhile. It returns an
// error, for the caller to answer with, when it has answered nothing: the
// sandbox could not be held (not found, stopped) or its port gave no
// answer (errdefs.BadGateway).
//
// A request the port refuses while the service on it starts (just started
// or restarted, its sandbox already awake) waits for the port, within
// ListenWait and while Starting says so, and is then passed on again; a
// browser's page load that waits longer than WakePage is answered the
// waking page meanwhile. It goes again as it came: the refusal comes
// before any connection its body could have been written to, and
// ReverseProxy never closes the body it was given.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target) error {
	if t.Port < 1 || t.Port > 65535 {
		return errdefs.InvalidArgument("port must be from 1 to 65535, got %d", t.Port)
	}
	if t.Starting == nil && p.cfg.Starting != nil {
		sandbox, port := t.Sandbox, t.Port
		t.Starting = func(ctx context.Context) bool { return p.cfg.Starting(ctx, sandbox, port) }
	}
	if t.Prefix != "" && r.Header.Get("Service-Worker") != "" {
		// A worker registered on the API's origin would see the console's
		// every request; a sandboxed page cannot register one, and this
		// refuses the script to whatever else asks.
		return errdefs.PermissionDenied("a path-routed preview serves no service worker: use the preview's host-routed URL (its own origin)")
	}
	// A server may answer while the request's body still comes (an echo,
	// a streamed upload's progress): the body is not to be read away
	// first, as net/http would for HTTP/1.
	_ = http.NewResponseController(w).EnableFullDuplex() // fails for HTTP/2 only, full duplex anyway
	refused, err := p.serveHeld(w, r, t, p.reach)
	if !refused || t.Starting == nil || !t.Starting(r.Context()) {
		return err
	}
	_, err = p.serveHeld(w, r, t, p.reachStarting)
	return err
}

// serveHeld passes r on to t once, holding t's sandbox by reach
// meanwhile; refused says the port refused r (nothing listens), which
// left r unanswered.
func (p *Proxy) serveHeld(w http.ResponseWriter, r *http.Request, t Target, reach reachFunc) (refused bool, err error) {
	sb, release, err := p.hold(w, r, t, reach)
	if err != nil || sb == nil {
		return false, err
	}
	defer release()
	req := &request{sb: sb, target: t}
	tw := &trackingWriter{ResponseWriter: w}
	p.rp.ServeHTTP(tw, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
	if tw.hijacked {
		return false, nil // the upgraded connection was the answer
	}
	return req.refused, req.err
}

// request is what one request's passage needs, in its context.
type request struct {
	sb     Sandbox
	target Target
	err    error // why it got no answer
	// refused: it got none because nothing listens on the port.
	refused bool
	// offeredHutchProtocol: the client offered hutch.v1, which was
	// stripped with its key (see stripResponse).
	offeredHutchProtocol bool
}

type requestKey struct{}

func requestOf(r *http.Request) *request { return r.Context().Value(requestKey{}).(*request) }

// rewrite makes the request the sandbox's server gets: its path without
// the prefix of path routing, its Host as the client sent it (the
// preview's host, which dev servers check), where it came from, and
// nothing meant for Hutch.
func rewrite(pr *httputil.ProxyRequest) {
	req := requestOf(pr.In)
	t := req.target
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
	if t.Prefix != "" {
		rest := strings.TrimPrefix(pr.In.URL.EscapedPath(), t.Prefix)
		if !strings.HasPrefix(rest, "/") {
			rest = "/" + rest
		}
		path, err := url.PathUnescape(rest)
		if err != nil {
			path = rest
		}
		out.URL.Path, out.URL.RawPath = path, rest
		if path == rest {
			out.URL.RawPath = ""
		}
	}
	pr.SetXForwarded()
	if t.Prefix != "" {
		out.Header.Set("X-Forwarded-Prefix", t.Prefix)
	}
	req.offeredHutchProtocol = stripRequest(out.Header, t.StripAuthorization)
}

// transport carries each request over its sandbox's ports transport.
type transport struct{}

func (transport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := requestOf(r).sb.Ports().RoundTrip(r)
	if res != nil && res.Request == nil {
		res.Request = r // stripResponse finds the request's target there
	}
	return res, err
}

// failed notes why a request got no answer, for Serve to return: the
// caller answers it with the API's error. A client gone has no answer
// coming.
func (p *Proxy) failed(_ http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	req := requestOf(r)
	req.err = p.gatewayError(r.Context(), req, err)
	req.refused = errors.Is(err, errdefs.ErrFailedPrecondition)
}

// gatewayError is what a request whose passage to the sandbox failed
// with err answers.
func (p *Proxy) gatewayError(ctx context.Context, req *request, err error) error {
	t := req.target
	switch {
	case errors.Is(err, errdefs.ErrFailedPrecondition): // nothing listens
		msg, _ := errdefs.UserMessage(err)
		return errdefs.BadGateway("sandbox %s: %s", t.Sandbox, msg)
	case errors.Is(err, errdefs.ErrUnavailable): // the agent
		return req.sb.Err(ctx, err)
	case errdefs.Kind(err) != nil:
		return err
	}
	p.log.Debug("preview request failed", "sandbox_id", t.Sandbox, "port", t.Port, "error", err)
	return errdefs.BadGateway("sandbox %s: the server on port %d closed the connection without a complete answer", t.Sandbox, t.Port)
}

// trackingWriter tells whether the connection was taken over (an upgrade):
// then nothing more may be written to it.
type trackingWriter struct {
	http.ResponseWriter
	hijacked bool
}

func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// copyBufferSize is the size of the buffers bodies are copied with: a
// large download moves in fewer reads and writes than with ReverseProxy's
// own 32 KiB (about 1.0 GB/s rather than 0.8 through a preview here). One
// is held per request in flight only.
const copyBufferSize = 256 << 10

// bufferPool hands ReverseProxy its buffers for copying bodies.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

func (bufferPool) Get() []byte { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) {
	if cap(b) == copyBufferSize {
		buffers.Put(&b)
	}
}
