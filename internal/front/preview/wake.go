package preview

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// wakeTimeout bounds a wake that no request waits for any more.
const wakeTimeout = 2 * time.Minute

// held is a sandbox held for a request, or why it could not be.
type held struct {
	sb      Sandbox
	release func()
	err     error
}

// reachFunc holds t's sandbox, and waits for what it has to before r may
// go to t's port: reach, or reachStarting.
type reachFunc func(ctx context.Context, t Target) held

// hold holds t's sandbox for r by reach, waking it if need be. When a
// browser's page load would wait longer than WakePage for that, it
// answers r with the waking page and returns a nil Sandbox; the wake goes
// on. Other requests wait for the wake as long as they last.
func (p *Proxy) hold(w http.ResponseWriter, r *http.Request, t Target, reach reachFunc) (Sandbox, func(), error) {
	ready := make(chan held, 1)
	// The wake outlives a request that leaves: the page's reload, or the
	// client's next try, finds the sandbox awake.
	go func() { ready <- reach(context.WithoutCancel(r.Context()), t) }()
	var page <-chan time.Time
	if wantsPage(r) && !t.WaitForWake {
		timer := time.NewTimer(p.cfg.WakePage)
		defer timer.Stop()
		page = timer.C
	}
	select {
	case h := <-ready:
		return h.sb, h.release, h.err
	case <-page:
		go letGo(ready)
		writeWakingPage(w, t.Sandbox)
		return nil, nil, nil
	case <-r.Context().Done():
		go letGo(ready)
		return nil, nil, r.Context().Err()
	}
}

// letGo releases what a request that did not wait was held.
func letGo(ready <-chan held) {
	if h := <-ready; h.err == nil {
		h.release()
	}
}

// reach holds t's sandbox and, if it had to be woken, waits for t's port
// to listen.
func (p *Proxy) reach(ctx context.Context, t Target) held {
	ctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	sb, release, err := p.cfg.Acquire(ctx, t.Sandbox)
	if err != nil {
		return held{err: err}
	}
	if sb.Woken() || p.isAwaited(t) {
		p.awaitPort(ctx, sb, t, nil)
	}
	return held{sb: sb, release: release}
}

// reachStarting holds t's sandbox and waits for t's port to listen while
// the service on it starts (see Serve).
func (p *Proxy) reachStarting(ctx context.Context, t Target) held {
	ctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	sb, release, err := p.cfg.Acquire(ctx, t.Sandbox)
	if err != nil {
		return held{err: err}
	}
	p.awaitPort(ctx, sb, t, t.Starting)
	return held{sb: sb, release: release}
}

// isAwaited says whether a request waits for t's port already (after a
// wake, or while its service starts): this one is to wait with it.
func (p *Proxy) isAwaited(t Target) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starting[portKey{t.Sandbox, t.Port}] != nil
}

// startingRecheck is how often a wait for a starting service's port asks
// whether the service still starts: it may have failed, and then nothing
// will listen.
const startingRecheck = 250 * time.Millisecond

// awaitPort waits, within ListenWait, until something listens on t's port:
// after a wake, the service on it is starting again. With stillStarting,
// it waits only as long as that says the service on the port starts. The
// requests for the port meanwhile wait for the same. When nothing listens
// in time, the request says so.
func (p *Proxy) awaitPort(ctx context.Context, sb Sandbox, t Target, stillStarting func(context.Context) bool) {
	key := portKey{t.Sandbox, t.Port}
	p.mu.Lock()
	done, waiting := p.starting[key]
	if !waiting {
		done = make(chan struct{})
		p.starting[key] = done
	}
	p.mu.Unlock()
	if waiting {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	defer func() {
		p.mu.Lock()
		delete(p.starting, key)
		p.mu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ListenWait)
	defer cancel()
	recheck := time.Now().Add(startingRecheck)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if !refuses(ctx, sb, t.Port) {
			return
		}
		if stillStarting != nil && time.Now().After(recheck) {
			if !stillStarting(ctx) {
				return
			}
			recheck = time.Now().Add(startingRecheck)
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
	}
}

// refuses says whether port refuses a connection, nothing listening on it
// yet: false when it accepts, or when it failed otherwise (not a matter of
// waiting: the request finds out).
func refuses(ctx context.Context, sb Sandbox, port int) bool {
	conn, err := sb.DialPort(ctx, port)
	if err == nil {
		_ = conn.Close()
		return false
	}
	return errors.Is(err, errdefs.ErrFailedPrecondition)
}

// wantsPage says whether r is a browser's page load: a GET that accepts
// HTML and upgrades to nothing.
func wantsPage(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") == "" &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

// HeaderPreview marks Hutch's own answers to preview requests:
// "waking" on the waking page.
const HeaderPreview = "Hutch-Preview"

// writeWakingPage answers with a page that says the sandbox is waking and
// reloads itself after a second. It is never cached: the next load is the
// app's.
func writeWakingPage(w http.ResponseWriter, id string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(HeaderPreview, "waking")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, wakingPage, html.EscapeString(id)) // the client may be gone
}

const wakingPage = `<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="1">
<title>Waking the sandbox…</title>
<style>body{font:16px system-ui,sans-serif;color:#555;display:grid;place-items:center;height:80vh}</style>
</head><body><p>Waking sandbox %s…</p></body></html>
`
