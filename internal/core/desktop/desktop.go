// Package desktop drives a sandbox's Linux desktop for computer-use
// agents: it starts the display (Xvfb with an Xfce session) and the live
// view (x11vnc behind noVNC's websockify, as two services whose previews
// are the view-only and the control stream), takes screenshots with
// scrot, and carries out lists of actions (moves, clicks, drags, scrolls,
// typing, key chords, waits) with xdotool, all as the sandbox user in the
// sandbox. The programs are the desktop template's (rootfs recipes), the
// ones E2B's Desktop SDK runs, so a desktop the SDK started is driven here
// too, and one started here answers the SDK.
package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/image/draw"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The desktop's display and the services of its live view.
const (
	Display = ":0"
	// ControlService is the control stream's service (noVNC on ControlPort,
	// which also runs the display), ViewService the view-only one's.
	ControlService = "desktop"
	ViewService    = "desktop-view"
	ControlPort    = 6090
	ViewPort       = 6091
	// The x11vnc servers behind them, on the sandbox's loopback.
	controlVNC = 5910
	viewVNC    = 5911
	// WebDir is noVNC's web client in the template.
	WebDir = "/usr/share/novnc"
)

// Default and largest screen sizes.
const (
	DefaultWidth  = 1024
	DefaultHeight = 768
	MaxSide       = 3840
	minSide       = 64
)

// readyTimeout bounds how long Start waits for the display and the
// desktop's session (gVisor starts Xfce's dozen processes slowly).
const readyTimeout = 90 * time.Second

// recentKept is how many of each desktop's latest actions are kept.
const recentKept = 20

// Execs is what the service needs of the exec service (*exec.Service).
type Execs interface {
	StartService(ctx context.Context, id string, req exec.ServiceRequest) (exec.ServiceInfo, error)
	Service(ctx context.Context, id, name string) (exec.ServiceInfo, error)
	DeleteProcess(ctx context.Context, id, name string) error
}

// Sandboxes holds a sandbox running for a call, and tells one's record
// without waking it (*core.Manager).
type Sandboxes interface {
	Acquire(ctx context.Context, id string) (r *core.Running, release func(), err error)
	Get(ctx context.Context, id string) (*store.Sandbox, error)
}

// Service drives the sandboxes' desktops. It is safe for concurrent use.
type Service struct {
	sandboxes Sandboxes
	execs     Execs
	log       *slog.Logger

	mu    sync.Mutex
	desks map[string]*desk // by sandbox
}

// desk is what the service keeps of one sandbox's desktop.
type desk struct {
	// run serializes the desktop's lists of actions: an agent's clicks
	// and a person's do not interleave mid-list.
	run sync.Mutex
	// recent are the latest actions, the last last; used, when they
	// were done (or the desktop was last asked of).
	recent []Done
	used   time.Time
	// size is the screen's as last seen (zero: not known), which actions
	// are checked against without asking the sandbox each time.
	size Size
}

// New returns a Service.
func New(sandboxes Sandboxes, execs Execs, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{sandboxes: sandboxes, execs: execs, log: log, desks: map[string]*desk{}}
}

// Size is a screen's size in pixels.
type Size struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Done is an action carried out, for the desktop's recent actions.
type Done struct {
	Time   time.Time `json:"time"`
	Action string    `json:"action"`
}

// Status is a desktop as it is.
type Status struct {
	Running bool
	Size    Size
	Cursor  Point
	Recent  []Done
}

// desktopScript starts what the control stream needs, as its service's
// command: the display (unless one answers already, as when E2B's SDK
// started it), the Xfce session (unless one runs), and once the desktop
// shows two x11vnc servers on the sandbox's loopback (control, and
// view-only: input from it is ignored by the server, whatever a viewer's
// client sends) and noVNC's websockify, which the service is. Everything
// it starts is in the service's process tree, which a stop or a suspend
// ends.
const desktopScript = `export DISPLAY=` + Display + `
if ! xdpyinfo >/dev/null 2>&1; then
	rm -f /tmp/.X0-lock # no display answers: the lock is a stopped one's (a suspend without memory)
	Xvfb ` + Display + ` -ac -screen 0 %dx%dx24 -retro -dpi 96 -nolisten tcp -nolisten unix >/tmp/hutch-xvfb.log 2>&1 &
	i=0
	until xdpyinfo >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $! 2>/dev/null; then echo "Xvfb did not start:" >&2; cat /tmp/hutch-xvfb.log >&2; exit 1; fi
		sleep 0.05
	done
fi
pgrep -x xfce4-session >/dev/null || startxfce4 >/tmp/hutch-xfce.log 2>&1 &
# The live view's servers once the desktop shows: not in its way meanwhile.
i=0
until pgrep -x xfdesktop >/dev/null || [ $i -gt 1200 ]; do i=$((i + 1)); sleep 0.1; done
x11vnc -display ` + Display + ` -localhost -rfbport %d -forever -shared -nopw -wait 20 -quiet >/tmp/hutch-x11vnc.log 2>&1 &
x11vnc -display ` + Display + ` -localhost -rfbport %d -forever -shared -nopw -wait 20 -quiet -viewonly >/tmp/hutch-x11vnc-view.log 2>&1 &
exec websockify --web ` + WebDir + ` %d 127.0.0.1:%d
`

// checkScript says whether the sandbox's template has the desktop's
// programs, naming what it lacks.
const checkScript = `for p in Xvfb xdpyinfo startxfce4 x11vnc websockify xdotool scrot; do command -v $p >/dev/null || echo $p; done`

// readyScript waits, up to readyWait, for the display to answer and for
// Xfce's window manager and desktop to run, then prints the screen's
// size; it prints nothing when the wait ends first. One command in the
// sandbox, not one per look: forks are dear while Xfce starts (under
// gVisor above all).
const readyScript = `export DISPLAY=` + Display + `
i=0
until xdpyinfo >/dev/null 2>&1 && pgrep -x xfwm4 >/dev/null && pgrep -x xfdesktop >/dev/null; do
	i=$((i + 1))
	[ $i -gt %d ] && exit 0
	sleep 0.1
done
xdotool getdisplaygeometry`

// readyWait bounds one readyScript: between two, ready looks at the
// desktop's service, which may have failed.
const readyWait = 5 * time.Second

// ready waits until the desktop shows and returns the screen's size; a
// desktop service that failed on the way is said with the end of its log.
func (s *Service) ready(ctx context.Context, r *core.Running) (Size, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	script := fmt.Sprintf(readyScript, int(readyWait/(100*time.Millisecond)))
	for {
		out, err := s.sh(ctx, r, script, time.Minute)
		if ctx.Err() != nil {
			return Size{}, errdefs.Unavailable("the desktop did not come up within %s", readyTimeout)
		}
		if err != nil {
			return Size{}, err
		}
		if len(out) > 0 {
			return parseSize(out)
		}
		if svc, err := s.execs.Service(ctx, r.ID(), ControlService); err == nil && svc.Status == exec.ServiceError {
			return Size{}, errdefs.FailedPrecondition("the desktop failed to start: %s", strings.TrimSpace(svc.LogTail))
		}
	}
}

// Start starts sandbox id's desktop at size (zero: DefaultWidth ×
// DefaultHeight) and its live view, and returns once the desktop shows.
// A desktop already running is left as it is; asked for another size, the
// answer is a conflict.
func (s *Service) Start(ctx context.Context, id string, size Size) (Status, error) {
	asked := size != Size{}
	if !asked {
		size = Size{DefaultWidth, DefaultHeight}
	}
	if size.Width < minSide || size.Height < minSide || size.Width > MaxSide || size.Height > MaxSide {
		return Status{}, errdefs.InvalidArgument("a screen is %d to %d pixels each way; got %dx%d", minSide, MaxSide, size.Width, size.Height)
	}
	r, release, err := s.sandboxes.Acquire(ctx, id)
	if err != nil {
		return Status{}, err
	}
	defer release()
	if out, err := s.sh(ctx, r, checkScript, time.Minute); err != nil {
		return Status{}, err
	} else if missing := strings.Fields(string(out)); len(missing) > 0 {
		return Status{}, errdefs.FailedPrecondition("this sandbox's template has no desktop (it lacks %s): create the sandbox from template desktop (hutch template build desktop)", strings.Join(missing, ", "))
	}
	script := fmt.Sprintf(desktopScript, size.Width, size.Height, controlVNC, viewVNC, ControlPort, controlVNC)
	replace := false
	if err := s.startService(ctx, id, exec.ServiceRequest{ProcessRequest: exec.ProcessRequest{Name: ControlService, Command: script, Port: ControlPort}, Replace: &replace}); err != nil {
		return Status{}, err
	}
	got, err := s.ready(ctx, r)
	if err != nil {
		return Status{}, err
	}
	// The view-only stream's, once the desktop shows: not in its way.
	view := []string{"websockify", "--web", WebDir, strconv.Itoa(ViewPort), "127.0.0.1:" + strconv.Itoa(viewVNC)}
	if err := s.startService(ctx, id, exec.ServiceRequest{ProcessRequest: exec.ProcessRequest{Name: ViewService, Cmd: view, Port: ViewPort}, Replace: &replace}); err != nil {
		return Status{}, err
	}
	if asked && got != size {
		return Status{}, errdefs.Conflict("the desktop runs at %dx%d: stop it (DELETE …/desktop) to start it at %dx%d", got.Width, got.Height, size.Width, size.Height)
	}
	s.log.Info("desktop shows", "sandbox_id", id, "width", got.Width, "height", got.Height)
	return s.status(ctx, r)
}

// startService starts svc unless it runs.
func (s *Service) startService(ctx context.Context, id string, svc exec.ServiceRequest) error {
	running, err := s.running(ctx, id, svc.Name)
	if err != nil || running {
		return err
	}
	_, err = s.execs.StartService(ctx, id, svc)
	return err
}

// running says whether service name of the desktop's runs.
func (s *Service) running(ctx context.Context, id, name string) (bool, error) {
	svc, err := s.execs.Service(ctx, id, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return svc.Status == exec.ServiceRunning || svc.Status == exec.ServiceStarting, nil
}

// Stop ends sandbox id's desktop: its live view, its session and the
// display (a display E2B's SDK started outside the services too).
func (s *Service) Stop(ctx context.Context, id string) error {
	for _, name := range []string{ViewService, ControlService} {
		if err := s.execs.DeleteProcess(ctx, id, name); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	r, release, err := s.sandboxes.Acquire(ctx, id)
	if err != nil {
		return err
	}
	defer release()
	s.mu.Lock()
	delete(s.desks, id)
	s.mu.Unlock()
	_, err = s.sh(ctx, r, "pkill -x Xvfb; pkill -x x11vnc; true", time.Minute)
	return err
}

// Status tells sandbox id's desktop: whether it runs, its size, the
// pointer and the latest actions. A sandbox that does not run is not woken
// for it: its desktop does not run either.
func (s *Service) Status(ctx context.Context, id string) (Status, error) {
	rec, err := s.sandboxes.Get(ctx, id)
	if err != nil {
		return Status{}, err
	}
	if rec.State != store.Running {
		return Status{Recent: s.Recent(id)}, nil
	}
	r, release, err := s.sandboxes.Acquire(ctx, id)
	if err != nil {
		return Status{}, err
	}
	defer release()
	return s.status(ctx, r)
}

// statusScript prints the screen's size and the pointer's place, or
// nothing when no display answers.
const statusScript = "export DISPLAY=" + Display + "; xdpyinfo >/dev/null 2>&1 || exit 0; xdotool getdisplaygeometry getmouselocation --shell"

func (s *Service) status(ctx context.Context, r *core.Running) (Status, error) {
	st := Status{Recent: s.Recent(r.ID())}
	out, err := s.sh(ctx, r, statusScript, time.Minute)
	if err == nil && len(out) == 0 || errors.Is(err, ErrNotRunning) {
		// No display (or one gone between xdpyinfo and xdotool), but the
		// desktop's service runs: it is starting again, as after a wake
		// that restarted it.
		if running, rerr := s.running(ctx, r.ID(), ControlService); rerr != nil || !running {
			s.knownSize(r.ID(), &Size{})
			return st, rerr
		}
		if _, err := s.ready(ctx, r); err != nil {
			return st, err
		}
		out, err = s.sh(ctx, r, statusScript, time.Minute)
	}
	if err != nil || len(out) == 0 {
		return st, err
	}
	first, rest, _ := bytes.Cut(out, []byte("\n"))
	if st.Size, err = parseSize(first); err != nil {
		return st, err
	}
	st.Cursor, err = parseCursor(rest)
	st.Running = err == nil
	if st.Running {
		s.knownSize(r.ID(), &st.Size)
	}
	return st, err
}

// Recent returns sandbox id's latest actions, the oldest first.
func (s *Service) Recent(id string) []Done {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.desks[id]; d != nil {
		return append([]Done{}, d.recent...)
	}
	return []Done{}
}

// Result is what a list of actions ends with.
type Result struct {
	Cursor Point
	// Screenshot is the screen after the actions, as PNG, when asked.
	Screenshot []byte
}

// Act carries out actions on sandbox id's desktop, in order, and answers
// when they are done: with the pointer's place and, when shot is not nil,
// a screenshot taken after them. An action the screen cannot take (a
// point off it, a key that is no key) refuses the whole list before any
// runs.
func (s *Service) Act(ctx context.Context, id string, actions []Action, shot *Shot) (Result, error) {
	if len(actions) > MaxActions {
		return Result{}, errdefs.InvalidArgument("at most %d actions a call; got %d", MaxActions, len(actions))
	}
	r, release, err := s.sandboxes.Acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()
	d := s.desk(id)
	d.run.Lock()
	defer d.run.Unlock()
	size, err := s.size(ctx, r)
	if err != nil {
		return Result{}, err
	}
	script, waited, err := actionScript(actions, size, shot)
	if err != nil {
		return Result{}, err
	}
	out, err := s.sh(ctx, r, script, time.Minute+waited)
	if errors.Is(err, ErrNotRunning) {
		// The display went away since it was last seen (a wake restarts
		// it): seen again, once it is back, the actions run on it.
		s.knownSize(id, &Size{})
		if size, err = s.size(ctx, r); err != nil {
			return Result{}, err
		}
		if script, waited, err = actionScript(actions, size, shot); err != nil {
			return Result{}, err
		}
		out, err = s.sh(ctx, r, script, time.Minute+waited)
	}
	s.remember(id, actions)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if shot != nil {
		if res.Screenshot, err = s.readShot(ctx, r, *shot); err != nil {
			return Result{}, err
		}
	}
	res.Cursor, err = parseCursor(out)
	return res, err
}

// actionScript is the script that does actions on a screen of size, and
// takes shot after them (nil: none), then prints the pointer's place; and
// how long the actions wait and type for.
func actionScript(actions []Action, size Size, shot *Shot) (string, time.Duration, error) {
	if shot != nil {
		if err := shot.check(size); err != nil {
			return "", 0, err
		}
	}
	// One xdotool runs as many commands as it can (chained: moves,
	// clicks, presses, waits): a fork fewer each. type takes every word
	// after it as text and key every key name, so each ends its chain.
	var script strings.Builder
	script.WriteString("set -e\nexport DISPLAY=" + Display + "\n")
	var chain []string
	flush := func() {
		if len(chain) == 0 {
			return
		}
		script.WriteString("xdotool")
		for _, arg := range chain {
			script.WriteString(" " + shellQuote(arg))
		}
		script.WriteString("\n")
		chain = nil
	}
	var waited time.Duration
	for i, a := range actions {
		cmds, err := a.commands(size.Width, size.Height)
		if err != nil {
			return "", 0, errdefs.Prefix(err, "action %d (%s)", i+1, a.Type)
		}
		for _, c := range cmds {
			chain = append(chain, c...)
			if c[0] == "type" || c[0] == "key" {
				flush()
			}
		}
		waited += time.Duration(a.Ms)*time.Millisecond + time.Duration(len(a.Text)*typingDelay)*time.Millisecond
	}
	if shot != nil {
		flush()
		script.WriteString(shot.command())
	}
	chain = append(chain, "getmouselocation", "--shell")
	flush()
	return script.String(), waited, nil
}

// size is the screen's size: as last seen, else asked of the sandbox r
// holds (waiting for a display that is starting).
func (s *Service) size(ctx context.Context, r *core.Running) (Size, error) {
	if size := s.knownSize(r.ID(), nil); size != (Size{}) {
		return size, nil
	}
	st, err := s.status(ctx, r)
	if err != nil {
		return Size{}, err
	}
	if !st.Running {
		return Size{}, ErrNotRunning
	}
	return st.Size, nil
}

// ErrNotRunning is the error of a call that needs the desktop running.
var ErrNotRunning = errdefs.FailedPrecondition("the desktop is not running: POST /v1/sandboxes/{id}/desktop starts it")

// Shot is what a screenshot shows: the whole screen or a region of it,
// scaled down or not.
type Shot struct {
	// Region is the part of the screen taken (nil: all of it).
	Region *Rect
	// Scale (0 < Scale ≤ 1; 0 is 1) shrinks the picture, as models that
	// see at most so many pixels want.
	Scale float64
}

// Rect is a region of the screen.
type Rect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

// shotFile is where a screenshot is written in the sandbox, then read.
const shotFile = "/tmp/.hutch-desktop-screenshot.png"

func (sh Shot) command() string {
	region := ""
	if r := sh.Region; r != nil {
		region = fmt.Sprintf(" -a %d,%d,%d,%d", r.X, r.Y, r.Width, r.Height)
	}
	return "scrot --overwrite --pointer" + region + " " + shotFile + "\n"
}

// Screenshot returns a PNG of sandbox id's screen.
func (s *Service) Screenshot(ctx context.Context, id string, shot Shot) ([]byte, error) {
	r, release, err := s.sandboxes.Acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer release()
	take := func() error {
		size, err := s.size(ctx, r)
		if err != nil {
			return err
		}
		if err := shot.check(size); err != nil {
			return err
		}
		_, err = s.sh(ctx, r, "export DISPLAY="+Display+"\n"+shot.command(), time.Minute)
		return err
	}
	if err := take(); errors.Is(err, ErrNotRunning) {
		s.knownSize(id, &Size{}) // gone since last seen: seen again, once back
		if err := take(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return s.readShot(ctx, r, shot)
}

func (sh Shot) check(size Size) error {
	if sh.Scale < 0 || sh.Scale > 1 {
		return errdefs.InvalidArgument("scale is between 0 and 1 (a screenshot is made smaller, never larger); got %g", sh.Scale)
	}
	if r := sh.Region; r != nil && (r.X < 0 || r.Y < 0 || r.Width < 1 || r.Height < 1 || r.X+r.Width > size.Width || r.Y+r.Height > size.Height) {
		return errdefs.InvalidArgument("region %dx%d at %d,%d is not on the %dx%d screen", r.Width, r.Height, r.X, r.Y, size.Width, size.Height)
	}
	return nil
}

// maxShotBytes bounds a screenshot read back (a 3840×3840 screen of
// noise is some 44 MB as PNG).
const maxShotBytes = 64 << 20

// readShot reads the screenshot the sandbox wrote, scaled as sh says.
func (s *Service) readShot(ctx context.Context, r *core.Running, sh Shot) ([]byte, error) {
	rc, err := r.Agent().ReadFile(ctx, shotFile, rootfs.UserName) // who wrote it: never root
	if err != nil {
		return nil, r.Err(ctx, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxShotBytes))
	if err != nil {
		return nil, r.Err(ctx, err)
	}
	if sh.Scale == 0 || sh.Scale == 1 {
		return data, nil
	}
	return scale(data, sh.Scale)
}

// scale shrinks a PNG by f. The PNG is the sandbox's to write (a file in
// its /tmp), so its size is checked before it is decoded: a header that
// claims a picture larger than any screen is refused, not allocated.
func scale(data []byte, f float64) ([]byte, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the screenshot is no PNG: %w", err)
	}
	if cfg.Width > MaxSide || cfg.Height > MaxSide {
		return nil, errdefs.FailedPrecondition("the screenshot is %dx%d, larger than a screen may be (%d each way)", cfg.Width, cfg.Height, MaxSide)
	}
	src, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the screenshot is no PNG: %w", err)
	}
	b := src.Bounds()
	w, h := max(1, int(float64(b.Dx())*f)), max(1, int(float64(b.Dy())*f))
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, b, draw.Src, nil)
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&out, dst); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// sh runs script by sh -c as the sandbox user in the sandbox r holds and
// returns its output; a failure says what it printed on stderr.
func (s *Service) sh(ctx context.Context, r *core.Running, script string, timeout time.Duration) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	res, err := exec.Run(ctx, r, exec.Request{Cmd: []string{"/bin/sh", "-c", script}, Timeout: timeout}, func(st exec.Stream, b []byte) error {
		if st == exec.Stdout {
			stdout.Write(b)
		} else {
			stderr.Write(b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(stderr.String())
		if noDisplay(msg) {
			return nil, ErrNotRunning
		}
		if res.TimedOut {
			msg = "timed out " + msg
		}
		return nil, errdefs.FailedPrecondition("the desktop's command failed (exit %d): %s", res.ExitCode, msg)
	}
	return stdout.Bytes(), nil
}

// noDisplay reports whether a desktop command's error says it found no
// display: xdotool's "Can't open display", scrot's "Can't open X display",
// xwininfo's "unable to open display", Xlib's "cannot open display".
func noDisplay(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "open display") || strings.Contains(msg, "open x display")
}

// desk returns sandbox id's desk, made when missing: past maxDesktops
// the one used longest ago is forgotten (a deleted sandbox's with it).
func (s *Service) desk(id string) *desk {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.desks[id]
	if d == nil {
		d = &desk{}
		s.desks[id] = d
	}
	d.used = time.Now()
	if len(s.desks) > maxDesktops {
		var oldest string
		var at time.Time
		for k, o := range s.desks {
			if oldest == "" || o.used.Before(at) {
				oldest, at = k, o.used
			}
		}
		delete(s.desks, oldest)
	}
	return d
}

// maxDesktops bounds how many sandboxes' desktops are kept in memory.
const maxDesktops = 1024

func (s *Service) remember(id string, actions []Action) {
	now := time.Now().UTC()
	d := s.desk(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range actions {
		d.recent = append(d.recent, Done{Time: now, Action: a.String()})
	}
	if len(d.recent) > recentKept {
		d.recent = append([]Done{}, d.recent[len(d.recent)-recentKept:]...)
	}
}

// knownSize is the size last seen of sandbox id's screen (zero: none).
func (s *Service) knownSize(id string, set *Size) Size {
	d := s.desk(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if set != nil {
		d.size = *set
	}
	return d.size
}

var (
	geometry = regexp.MustCompile(`^(\d+) (\d+)\s*$`)
	location = regexp.MustCompile(`(?m)^X=(\d+)\s*\nY=(\d+)\s*$`)
)

func parseSize(out []byte) (Size, error) {
	m := geometry.FindSubmatch(bytes.TrimSpace(out))
	if m == nil {
		return Size{}, fmt.Errorf("xdotool getdisplaygeometry said %q", out)
	}
	w, _ := strconv.Atoi(string(m[1]))
	h, _ := strconv.Atoi(string(m[2]))
	return Size{w, h}, nil
}

func parseCursor(out []byte) (Point, error) {
	m := location.FindSubmatch(out)
	if m == nil {
		return Point{}, fmt.Errorf("xdotool getmouselocation said %q", out)
	}
	x, _ := strconv.Atoi(string(m[1]))
	y, _ := strconv.Atoi(string(m[2]))
	return Point{x, y}, nil
}

// shellQuote quotes s for sh: in single quotes, a quote in it closed,
// escaped and opened again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
