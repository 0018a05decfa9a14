// Package screenshot takes screenshots of the pages sandboxes serve. The
// browser never runs on the host: each workspace has a browser sandbox of
// its own (template browser, Debian's Chromium, network mode none, kept
// by the key Key), whose Chromium the daemon drives over DevTools through
// the sandbox's agent. The browser reaches nothing by itself: every
// request a page makes is held at the browser and answered by the daemon
// from the preview of the sandbox being shot (internal/front/preview), so what
// it renders is what that sandbox serves, and a page's requests to other
// hosts fail.
package screenshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
)

const (
	// Template is the browser sandboxes' template.
	Template = "browser"
	// Key is the key of a workspace's browser sandbox.
	Key = "hutch-screenshots"
	// browserIdle is how long a browser sandbox is kept with no
	// screenshot to take: it is deleted then, and made again for the next.
	browserIdle = 5 * time.Minute
	// devtoolsPort is where Chromium's DevTools listen, on the browser
	// sandbox's loopback.
	devtoolsPort = 9222
	// browserStart bounds Chromium's start (seconds under gVisor here).
	browserStart = 60 * time.Second
	// MaxSize bounds a screenshot's width and height, in pixels.
	MaxSize = 8192
)

// browserCmd starts Chromium, headless, with DevTools on loopback. Its own
// sandbox (setuid or user namespaces) is off: it needs privileges the
// sandbox user has not, and the browser sandbox is what confines it.
var browserCmd = []string{
	"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
	"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=" + strconv.Itoa(devtoolsPort),
	"--user-data-dir=/tmp/hutch-browser", "--no-first-run", "--no-default-browser-check",
	"--disable-background-networking", "--disable-extensions", "--disable-sync", "--mute-audio",
	"--hide-scrollbars", "about:blank",
}

// Shooter takes screenshots. It is safe for concurrent use.
type Shooter struct {
	core     *core.Manager
	procs    *exec.Service
	previews *preview.Proxy
	log      *slog.Logger
}

// New returns a Shooter whose pages come from previews.
func New(core *core.Manager, procs *exec.Service, previews *preview.Proxy, log *slog.Logger) *Shooter {
	return &Shooter{core: core, procs: procs, previews: previews, log: log}
}

// Shot is a screenshot asked for: of what port of a sandbox serves at
// Path (with its query), the rest as in Request.
type Shot struct {
	Sandbox string
	Port    int
	Path    string
	Width   int
	Height  int
	// FullPage and Clip: see Request.
	FullPage bool
	Clip     *Clip
}

// check fills in defaults and checks every field, reporting all problems
// at once.
func (s Shot) check() (Shot, error) {
	if s.Width == 0 {
		s.Width = 1280
	}
	if s.Height == 0 {
		s.Height = 800
	}
	if s.Path == "" {
		s.Path = "/"
	}
	var errs []error
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, fmt.Errorf("port must be from 1 to 65535, got %d", s.Port))
	}
	if !strings.HasPrefix(s.Path, "/") {
		errs = append(errs, fmt.Errorf("path must start with /, got %q", s.Path))
	}
	if s.Width < 1 || s.Width > MaxSize || s.Height < 1 || s.Height > MaxSize {
		errs = append(errs, fmt.Errorf("width and height must be from 1 to %d, got %d and %d", MaxSize, s.Width, s.Height))
	}
	if c := s.Clip; c != nil {
		if s.FullPage {
			errs = append(errs, errors.New("give clip or full_page, not both"))
		}
		if c.X < 0 || c.Y < 0 || c.W < 1 || c.H < 1 || c.W > MaxSize || c.H > MaxSize {
			errs = append(errs, fmt.Errorf("clip must have x and y from 0, w and h from 1 to %d, got %+v", MaxSize, *c))
		}
	}
	if len(errs) > 0 {
		return s, errdefs.InvalidArgument("%v", errors.Join(errs...))
	}
	return s, nil
}

// Shoot takes the screenshot shot asks for and returns it as PNG. The
// caller has checked that whoever asks may reach the sandbox.
func (s *Shooter) Shoot(ctx context.Context, shot Shot) ([]byte, error) {
	shot, err := shot.check()
	if err != nil {
		return nil, err
	}
	target, err := s.core.Get(ctx, shot.Sandbox)
	if err != nil {
		return nil, err
	}
	dial, release, err := s.browser(ctx, target.Workspace)
	if err != nil {
		return nil, err
	}
	defer release()
	// The page is the sandbox's own, as a browser in it would open it.
	u := "http://localhost:" + strconv.Itoa(shot.Port) + shot.Path
	return capture(ctx, dial, Request{URL: u, Width: shot.Width, Height: shot.Height, FullPage: shot.FullPage, Clip: shot.Clip},
		pages{previews: s.previews, sandbox: shot.Sandbox})
}

// browser holds workspace ws's browser sandbox running, making it and
// starting its Chromium if need be, and returns how to reach Chromium's
// DevTools until release is called.
func (s *Shooter) browser(ctx context.Context, ws string) (DialFunc, func(), error) {
	sb, created, err := s.core.Create(ctx, create.Options{
		Template: Template, Workspace: ws, Key: Key,
		MemoryMB: 1024, Pids: 1024, // Chromium's processes and threads
		IdleTimeout: browserIdle, IdleAction: store.IdleDelete,
		Network:  &netpolicy.Policy{Mode: netpolicy.None},
		Metadata: map[string]string{"hutch.purpose": "screenshots"},
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, nil, errdefs.FailedPrecondition("screenshots are taken in a sandbox of the %s template, which this daemon lacks: build it with `hutch template build %s` (%v)", Template, Template, err)
	}
	if err != nil {
		return nil, nil, err
	}
	if created {
		s.log.Info("browser sandbox made", "sandbox_id", sb.ID, "workspace", ws)
	}
	r, release, err := s.core.Acquire(ctx, sb.ID)
	if err != nil {
		return nil, nil, err
	}
	dial := func(ctx context.Context) (net.Conn, error) { return r.Agent().DialPort(ctx, devtoolsPort) }
	if err := s.startBrowser(ctx, sb.ID, dial); err != nil {
		release()
		return nil, nil, err
	}
	return dial, release, nil
}

// startBrowser starts the browser sandbox's Chromium unless it runs, and
// waits for its DevTools to listen. It runs as a background process with
// a port: the sandbox idles with it running.
func (s *Shooter) startBrowser(ctx context.Context, id string, dial DialFunc) error {
	if conn, err := dial(ctx); err == nil {
		_ = conn.Close()
		return nil
	}
	_, err := s.procs.StartProcess(ctx, id, exec.ProcessRequest{Name: "chromium", Cmd: browserCmd, Port: devtoolsPort})
	if err != nil && !errors.Is(err, errdefs.ErrConflict) { // a conflict: another screenshot started it
		return fmt.Errorf("starting the browser in sandbox %s: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, browserStart)
	defer cancel()
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		conn, err := dial(ctx)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return errdefs.Unavailable("the browser in sandbox %s did not start within %s: see `hutch service logs %s chromium`", id, browserStart, id)
		case <-time.After(delay):
		}
	}
}

// pages serves a page's requests for http://localhost:PORT/… from the
// preview of PORT of the sandbox being shot.
type pages struct {
	previews *preview.Proxy
	sandbox  string
}

func (p pages) Serves(u *url.URL) bool {
	port, err := strconv.Atoi(u.Port())
	return u.Scheme == "http" && u.Hostname() == "localhost" && err == nil && port > 0 && port <= 65535
}

func (p pages) Serve(w http.ResponseWriter, r *http.Request) error {
	port, _ := strconv.Atoi(r.URL.Port())
	// No waking page: the screenshot waits for the wake.
	return p.previews.Serve(w, r, preview.Target{Sandbox: p.sandbox, Port: port, WaitForWake: true})
}
