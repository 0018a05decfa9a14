package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/rfb"
)

// Row (p): desktops (template desktop), under runc and gVisor, on a
// daemon of its own whose builds share the end-to-end tests' package
// cache (the template is built once a machine, then unpacked):
//
//   - desktop ready: a create and POST …/desktop until the first
//     screenshot, beside a create and the same programs started by hand
//     through exec (Xvfb, then xdpyinfo until it answers, then Xfce until
//     its window manager and desktop run, then scrot): the floor of doing
//     it without the desktop API;
//   - an action round trip (a pointer move) with and without a screenshot
//     after it, beside one exec of the same xdotool (and scrot) command;
//   - the live view's frame rate at 1280×800 while a terminal scrolls
//     text, read by a VNC client over the view-only link's WebSocket;
//   - the memory of an idle desktop sandbox, beside an idle sandbox of the
//     same template without its desktop.

// desktopCache is where the row's daemon keeps packages and kept builds:
// the end-to-end tests' (test/e2e's packageCache).
const desktopCache = "/var/cache/hutch-e2e/debs"

// measureDesktop is row (p).
func (b *bench) measureDesktop(ctx context.Context) (_ section, err error) {
	dir := filepath.Join(b.dir, "desktop")
	// #nosec G301 -- runc reaches sandbox roots through it from their user namespaces
	if err := os.Mkdir(dir, 0o711); err != nil {
		return section{}, err
	}
	d, err := startDaemon(ctx, b.cfg.hutch, b.runsc, dir, "--pool", "base=0", "--package-cache", desktopCache)
	if d != nil {
		defer func() { err = errors.Join(err, d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, d.deleteAll)) }()
	}
	if err != nil {
		return section{}, err
	}
	b.showProgress("(p) desktops: building the desktop template (unpacked when kept)")
	if _, err := d.client.BuildTemplate(ctx, client.BuildTemplateRequest{Name: "desktop"}, func(p client.BuildProgress) {
		b.showProgress("(p) desktops: building the desktop template: %s %s", p.Step, p.Message)
	}); err != nil {
		return section{}, fmt.Errorf("build the desktop template: %w", err)
	}
	b.endProgress()
	runtimes := []string{"runc"}
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		runtimes = append(runtimes, "gvisor")
	}
	s := section{title: "(p) desktops (template desktop)"}
	for _, rt := range runtimes {
		rows, results, err := b.measureDesktopOf(ctx, d, rt)
		if err != nil {
			return section{}, err
		}
		s.rows, s.results = append(s.rows, rows...), append(s.results, results...)
	}
	return s, nil
}

const topicDesktop = "Desktops"

// handStart starts what POST …/desktop starts, by hand, through exec, and
// takes a screenshot: the floor of desktop ready.
const handStart = `export DISPLAY=:0
Xvfb :0 -ac -screen 0 1024x768x24 -nolisten tcp -nolisten unix >/dev/null 2>&1 &
until xdpyinfo >/dev/null 2>&1; do sleep 0.05; done
setsid startxfce4 >/dev/null 2>&1 &
until pgrep -x xfwm4 >/dev/null && pgrep -x xfdesktop >/dev/null; do sleep 0.1; done
scrot /tmp/hand.png`

// measureDesktopOf is row (p) for one runtime.
func (b *bench) measureDesktopOf(ctx context.Context, d *daemon, rt string) (_ []row, _ []result, err error) {
	n := max(b.cfg.n/10, 3)
	if rt == "gvisor" {
		n = max(min(b.cfg.gvisorN/4, n), 3)
	}
	create := func(ctx context.Context) (string, error) {
		sb, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Template: "desktop", Runtime: rt})
		if err != nil {
			return "", err
		}
		return sb.ID, nil
	}
	ready := &peer{name: "create + POST …/desktop + screenshot", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		id, err := create(ctx)
		if err == nil {
			if _, err = d.client.StartDesktop(ctx, id, client.DesktopRequest{}); err == nil {
				_, err = d.client.DesktopScreenshot(ctx, id, client.DesktopShot{})
			}
		}
		took := time.Since(start)
		if id != "" {
			err = errors.Join(err, d.client.DeleteSandbox(ctx, id))
		}
		return took, err
	}}
	hand := &peer{name: "create + the same programs by hand (exec)", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		id, err := create(ctx)
		if err == nil {
			var res *client.ExecResult
			res, err = d.client.Exec(ctx, id, client.ExecRequest{Command: handStart, TimeoutS: 120})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("by hand: %+v", res)
			}
		}
		took := time.Since(start)
		if id != "" {
			err = errors.Join(err, d.client.DeleteSandbox(ctx, id))
		}
		return took, err
	}}
	if err := b.interleave(ctx, "(p) desktop ready, "+rt, n, ready, hand); err != nil {
		return nil, nil, err
	}

	// One desktop for the round trips, the stream and its memory.
	id, err := create(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, d.client.DeleteSandbox(ctx, id)) }()
	if _, err := d.client.StartDesktop(ctx, id, client.DesktopRequest{Width: 1280, Height: 800}); err != nil {
		return nil, nil, err
	}
	x := 0
	move := func(shot bool) func(context.Context) (time.Duration, error) {
		return func(ctx context.Context) (time.Duration, error) {
			x = (x + 37) % 1000
			req := client.DesktopActionsRequest{Actions: []client.DesktopAction{{Type: "move", X: client.At(100 + x), Y: client.At(300)}}}
			if shot {
				req.Screenshot = &client.DesktopShot{}
			}
			start := time.Now()
			res, err := d.client.DesktopActions(ctx, id, req)
			took := time.Since(start)
			if err == nil && (res.Cursor.X != 100+x || shot && len(res.Screenshot) == 0) {
				err = fmt.Errorf("the move answered %+v, %d bytes of screenshot", res.Cursor, len(res.Screenshot))
			}
			return took, err
		}
	}
	execOf := func(command string, read bool) func(context.Context) (time.Duration, error) {
		return func(ctx context.Context) (time.Duration, error) {
			x = (x + 37) % 1000
			start := time.Now()
			res, err := d.client.Exec(ctx, id, client.ExecRequest{Command: fmt.Sprintf(command, 100+x)})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("%s: %+v", command, res)
			}
			if err == nil && read {
				var rc io.ReadCloser
				if rc, err = d.client.ReadFile(ctx, id, "/tmp/floor.png"); err == nil {
					var n int64
					n, err = io.Copy(io.Discard, rc)
					err = errors.Join(err, rc.Close())
					if err == nil && n == 0 {
						err = errors.New("an empty screenshot")
					}
				}
			}
			return time.Since(start), err
		}
	}
	action := &peer{name: "action", run: move(false)}
	actionShot := &peer{name: "action + screenshot", run: move(true)}
	floor := &peer{name: "exec xdotool", run: execOf("DISPLAY=:0 xdotool mousemove --sync %d 300 getmouselocation", false)}
	floorShot := &peer{name: "exec xdotool + scrot + read", run: execOf("DISPLAY=:0 xdotool mousemove --sync %d 300 && DISPLAY=:0 scrot -o -p /tmp/floor.png", true)}
	rounds := b.cfg.n
	if rt == "gvisor" {
		rounds = min(b.cfg.gvisorN, rounds)
	}
	if err := b.interleave(ctx, "(p) action round trip, "+rt, rounds, action, actionShot, floor, floorShot); err != nil {
		return nil, nil, err
	}

	fps, mbps, err := b.streamRate(ctx, d, id)
	if err != nil {
		return nil, nil, err
	}

	// Memory: the desktop, left idle, beside a sandbox of the template
	// without its desktop.
	plain, err := create(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, d.client.DeleteSandbox(ctx, plain)) }()
	if _, err := d.client.Exec(ctx, id, client.ExecRequest{Command: "pkill -x xfce4-terminal; true"}); err != nil {
		return nil, nil, err
	}
	b.showProgress("(p) memory of an idle desktop, %s", rt)
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(5 * time.Second):
	}
	b.endProgress()
	var mem [2]cgroupUsage
	for i, sb := range []string{id, plain} {
		cg, err := cgroupPath(d.sandboxDir(sb))
		if err != nil {
			return nil, nil, err
		}
		if mem[i], err = cgroupMemory(cg); err != nil {
			return nil, nil, fmt.Errorf("memory cgroup of sandbox %s: %w", sb, err)
		}
	}
	return desktopRows(rt, ready.samples, hand.samples, action.samples, actionShot.samples, floor.samples, floorShot.samples, fps, mbps, mem[0], mem[1])
}

// streamSeconds is how long the frame rate is read for.
const streamSeconds = 5

// streamRate runs a terminal that scrolls text without end on sandbox
// id's desktop and reads its live view for streamSeconds through the
// view-only link, as a viewer's noVNC does (an incremental update asked
// for as soon as the last came): frames a second and MB a second of raw
// pixels.
func (b *bench) streamRate(ctx context.Context, d *daemon, id string) (fps, mbps float64, err error) {
	if _, err := d.client.Exec(ctx, id, client.ExecRequest{Command: "DISPLAY=:0 setsid xfce4-terminal --maximize -x sh -c 'while :; do ls -lR /usr; done' >/dev/null 2>&1 & sleep 2"}); err != nil {
		return 0, 0, err
	}
	link, err := d.client.DesktopStream(ctx, id, client.DesktopStreamRequest{})
	if err != nil {
		return 0, 0, err
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		return 0, 0, err
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return 0, 0, err
	}
	// {port}-{id}.localhost is the daemon's listener.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, d.addr)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dial}}
	resp, err := hc.Get(link.URL)
	if err != nil {
		return 0, 0, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("the stream's link answered %s", resp.Status)
	}
	wctx, cancel := context.WithTimeout(ctx, (streamSeconds+30)*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(wctx, "ws://"+u.Host+"/websockify", &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{"binary"}})
	if err != nil {
		return 0, 0, err
	}
	ws.SetReadLimit(64 << 20)
	conn := websocket.NetConn(wctx, ws, websocket.MessageBinary)
	defer conn.Close()
	vnc, err := rfb.Handshake(conn)
	if err != nil {
		return 0, 0, err
	}
	if vnc.Width != 1280 || vnc.Height != 800 {
		return 0, 0, fmt.Errorf("the stream is %dx%d, not 1280x800", vnc.Width, vnc.Height)
	}
	if err := vnc.RequestUpdate(false); err != nil {
		return 0, 0, err
	}
	if _, err := vnc.ReadUpdate(); err != nil { // the whole screen, first
		return 0, 0, err
	}
	b.showProgress("(p) the live view's frame rate, %d s", streamSeconds)
	var frames int
	var bytes int64
	start := time.Now()
	for time.Since(start) < streamSeconds*time.Second {
		if err := vnc.RequestUpdate(true); err != nil {
			return 0, 0, err
		}
		up, err := vnc.ReadUpdate()
		if err != nil {
			return 0, 0, err
		}
		if up.Rects > 0 {
			frames++
			bytes += up.Pixels
		}
	}
	took := time.Since(start).Seconds()
	b.endProgress()
	return float64(frames) / took, float64(bytes) / took / 1e6, nil
}

// desktopRows are row (p)'s lines for one runtime.
func desktopRows(rt string, ready, hand, action, actionShot, floor, floorShot []time.Duration, fps, mbps float64, deskMem, plainMem cgroupUsage) ([]row, []result, error) {
	rm, hm := median(ready), median(hand)
	am, asm, fm, fsm := median(action), median(actionShot), median(floor), median(floorShot)
	rows := []row{
		durationRow(rt+": desktop ready: create, POST …/desktop, first screenshot", ready),
		durationRow("  the same programs started by hand through exec (floor)", hand),
		durationRow("  an action (a pointer move), POST …/desktop/actions", action),
		durationRow("  the same with a screenshot after it", actionShot),
		durationRow("  exec of the same xdotool command (floor)", floor),
		durationRow("  exec of xdotool and scrot, and the file read (floor)", floorShot),
		{label: "  live view at 1280x800, a terminal scrolling", median: fmt.Sprintf("%.1f frames/s, %.0f MB/s", fps, mbps)},
		{label: "  memory of an idle desktop sandbox (cgroup; anonymous)", median: fmtBytes(deskMem.usage) + " (" + fmtBytes(deskMem.rss) + ")"},
		{label: "  the same of an idle sandbox of the template, no desktop", median: fmtBytes(plainMem.usage) + " (" + fmtBytes(plainMem.rss) + ")"},
	}
	name := map[string]string{"runc": "runc", "gvisor": "gVisor"}[rt]
	results := []result{
		{
			ID: "p/ready-" + rt, Topic: topicDesktop, What: "desktop ready, " + name + ": create, start the desktop, first screenshot",
			Hutch: durationFig("", rm),
			Peers: []figure{durationFig("a create and the same programs started by hand through exec", hm)},
			Ratio: []term{ratioTerm(ratio(rm, hm), "by hand")},
		},
		{
			ID: "p/action-" + rt, Topic: topicDesktop, What: "an action's round trip (a pointer move), " + name,
			Hutch: durationFig("", am),
			Peers: []figure{durationFig("one exec of the same xdotool command", fm)},
			Ratio: []term{ratioTerm(ratio(am, fm), "the exec")},
		},
		{
			ID: "p/action-shot-" + rt, Topic: topicDesktop, What: "the same with a screenshot after it (1280×800 PNG), " + name,
			Hutch: durationFig("", asm),
			Peers: []figure{durationFig("one exec of xdotool and scrot, and the file read", fsm)},
			Ratio: []term{ratioTerm(ratio(asm, fsm), "exec and read")},
		},
		{
			ID: "p/stream-" + rt, Topic: topicDesktop, What: "the live view at 1280×800 while a terminal scrolls, " + name + ": frames a second over the view-only link (raw pixels, an update asked for as soon as the last came)",
			Hutch: figure{Text: fmt.Sprintf("%.1f frames/s (%.0f MB/s of pixels)", fps, mbps), Median: ptr(rounded(fps, 1)), Unit: "frames/s"},
		},
		{
			ID: "p/memory-" + rt, Topic: topicDesktop, What: "memory of an idle desktop sandbox, " + name + ": its memory cgroup (anonymous: " + fmtBytes(deskMem.rss) + "; the rest mostly the page cache of the programs it read" + map[string]string{"runc": ", which the desktops of a template share", "gvisor": " and gVisor's own"}[rt] + ")",
			Hutch: bytesFig("", deskMem.usage),
			Peers: []figure{bytesFig("an idle sandbox of the same template without its desktop", plainMem.usage)},
			Ratio: []term{{Text: "+" + fmtBytes(deskMem.usage-plainMem.usage) + " for the desktop"}},
		},
	}
	return rows, results, nil
}
