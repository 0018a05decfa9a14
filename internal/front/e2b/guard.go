package e2b

import (
	"context"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/audit"
)

// What the front adds to a call of envd or the code interpreter, as
// Hutch's API does to its own (internal/front/api's audit.go and limits.go): a
// rate per key, and an entry in the audit log for each call that acts.
// Other ports (a sandbox's own services) have neither, as Hutch's
// previews have not: they are the tenant's web traffic.

// AuditLog is where the front's entries go (*audit.Log).
type AuditLog interface {
	Record(ctx context.Context, e audit.Entry)
}

// The audit entries' Key for a call that carries no token (an open
// route's, on a sandbox with public traffic), and what their Action
// starts with.
const (
	auditAnyone = "(no token)"
	auditAction = "e2b-front "
)

// auditedCall says whether a call of method on path (canonical) of port
// is recorded: every call that acts (starts, signals or feeds a process,
// reads, writes, moves or removes a file or lists a directory, runs
// code, makes, restarts or removes a code context), not envd's and the
// interpreter's health checks, nor the listings of processes and
// contexts and a process's output (reads, as Hutch's API records none).
func auditedCall(port int, method, path string) bool {
	switch port {
	case EnvdPort:
		switch path {
		case "/health", "/process.Process/List", "/process.Process/Connect":
			return false
		}
		return true
	case InterpreterPort:
		switch {
		case path == "/health":
			return false
		case path == "/contexts" && method == http.MethodGet:
			return false
		}
		return true
	}
	return false
}

// auditing returns w as a recorder whose done records the call once it
// is answered, if its route is recorded (auditedCall) and its caller is
// one: it carries a live key's token (or signature), or makes an open
// route's call that it may. A call refused for want of a token is not
// recorded, as Hutch's API records no call without a valid key: the log
// is of what keys did, and anyone may send calls.
func (f *Front) auditing(w http.ResponseWriter, r *http.Request, sb *store.Sandbox, port int, c caller) (http.ResponseWriter, func()) {
	if f.cfg.Audit == nil || !auditedCall(port, r.Method, r.URL.Path) || c.key() == nil && !f.mayCall(r, sb, port, c) {
		return w, func() {}
	}
	rec := &statusRecorder{ResponseWriter: w}
	return rec, func() {
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		e := audit.Entry{
			Time: time.Now().UTC(), Key: auditAnyone, Workspace: sb.Workspace,
			Action: auditAction + r.Method + " " + r.URL.Path, Object: auditObject(r, sb.ID, port), Status: status,
		}
		if h := c.key(); h != nil {
			e.Key = h.name
		}
		if c.signed != nil {
			e.Object += " (signed)"
		}
		if f.cfg.Redactor != nil { // a path a caller gave may hold a value it should not have
			e.Object = f.cfg.Redactor.Set().String(e.Object)
		}
		f.cfg.Audit.Record(r.Context(), e)
	}
}

// auditObject names what a call acted on: the sandbox, and a /files
// call's path or a code context's id; never a body.
func auditObject(r *http.Request, id string, port int) string {
	parts := []string{id}
	if port == EnvdPort && r.URL.Path == "/files" {
		if p := r.URL.Query().Get("path"); p != "" {
			parts = append(parts, p)
		}
	}
	if port == InterpreterPort {
		if rt, ok := codeRouteOf(r.URL.Path); ok && rt.contextID != "" {
			parts = append(parts, rt.contextID)
		}
	}
	return strings.Join(parts, " ")
}

// statusRecorder keeps the status an answer began with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// streams, deadlines).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on, for handlers that assert http.Flusher.
func (w *statusRecorder) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// limiter holds a token bucket per caller: a key's, a sandbox's for the
// calls that carry no token, an address's for the search of a /files
// URL that names no sandbox. A nil limiter limits nothing.
type limiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	pruneAt int // the count of buckets at which full ones are forgotten
}

// newLimiter returns a limiter of perSecond calls a second on average
// and burst at once (at least perSecond); nil when perSecond is not
// above 0.
func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{rate: rate.Limit(perSecond), burst: max(burst, int(math.Ceil(perSecond))), buckets: map[string]*rate.Limiter{}, pruneAt: minPrune}
}

// minPrune is the fewest buckets at which full ones are forgotten. A full
// bucket is as a new one, so forgetting it changes nothing; buckets named
// by callers (a sandbox id that does not exist) stay as many as were used
// within the time a bucket takes to fill.
const minPrune = 4096

// allow takes a call from name's bucket, or answers 429 in E2B's shape
// with Retry-After and says false.
func (l *limiter) allow(w http.ResponseWriter, name string) bool {
	if l == nil {
		return true
	}
	now := time.Now()
	l.mu.Lock()
	b, ok := l.buckets[name]
	if !ok {
		if len(l.buckets) >= l.pruneAt {
			for k, b := range l.buckets {
				if b.TokensAt(now) >= float64(l.burst) {
					delete(l.buckets, k)
				}
			}
			l.pruneAt = max(minPrune, 2*len(l.buckets))
		}
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[name] = b
	}
	l.mu.Unlock()
	res := b.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d == 0 {
		return true
	}
	res.CancelAt(now)
	secs := max(1, int(math.Ceil(d.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, name+" made more than its "+strconv.FormatFloat(float64(l.rate), 'g', -1, 64)+
		" calls a second (bursts of "+strconv.Itoa(l.burst)+"); try again in "+strconv.Itoa(secs)+" s")
	return false
}

// bucket names the rate a call of c's on sb is taken from: its key's, as
// Hutch's API's, or the sandbox's when it carries no token.
func (c caller) bucket(sb *store.Sandbox) string {
	if h := c.key(); h != nil {
		if h.name == "" {
			return "the daemon's own key"
		}
		return "key " + h.name
	}
	return "sandbox " + sb.ID
}

// remoteHost is r's client's address, without its port.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
