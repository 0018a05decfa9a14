package e2e

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// screenshotPage is a page whose left half is red and right half blue,
// 1500 pixels tall: what a screenshot's pixels are checked against.
const screenshotPage = `<!doctype html>
<html><head><style>
html, body { margin: 0; }
.half { position: absolute; top: 0; width: 50%; height: 1500px; }
</style></head>
<body><div class="half" style="left: 0; background: #ff0000"></div><div class="half" style="left: 50%; background: #0000ff"></div></body></html>
`

// screenshots checks screenshots of a service of a sandbox under runtime,
// in a daemon that has the browser template: the window's pixels, a clip,
// the full page, the CLI, bad requests, and the workspace's browser
// sandbox the first screenshot made.
func screenshots(t *testing.T, d *daemon, runtime string) {
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
	if _, err := d.client.WriteFile(ctx, sb.ID, "/tmp/site/index.html", strings.NewReader(screenshotPage)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.StartService(ctx, sb.ID, client.StartServiceRequest{
		Name: "page", Port: 8123, Cmd: []string{"python3", "-m", "http.server", "8123", "--bind", "127.0.0.1", "--directory", "/tmp/site"},
	}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, sb.ID, "page", client.ServiceRunning)

	red, blue := color.NRGBA{R: 255, A: 255}, color.NRGBA{B: 255, A: 255}
	shot := func(req client.ScreenshotRequest) image.Image {
		t.Helper()
		b, err := d.client.Screenshot(ctx, sb.ID, "page", req)
		if err != nil {
			t.Fatalf("screenshot %+v: %v", req, err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("screenshot %+v is no PNG: %v", req, err)
		}
		return img
	}
	expect := func(what string, img image.Image, w, h int, pixels map[image.Point]color.NRGBA) {
		t.Helper()
		if size := img.Bounds().Size(); size != image.Pt(w, h) {
			t.Errorf("%s: %v, want %dx%d", what, size, w, h)
			return
		}
		for p, want := range pixels {
			if got := color.NRGBAModel.Convert(img.At(p.X, p.Y)).(color.NRGBA); got != want {
				t.Errorf("%s: pixel %v is %v, want %v", what, p, got, want)
			}
		}
	}

	window := shot(client.ScreenshotRequest{Width: 400, Height: 300})
	expect("the window", window, 400, 300, map[image.Point]color.NRGBA{
		{10, 10}: red, {190, 290}: red, {210, 10}: blue, {390, 290}: blue,
	})
	clip := shot(client.ScreenshotRequest{Width: 400, Height: 300, Clip: &client.Clip{X: 150, Y: 1000, W: 100, H: 50}})
	expect("a clip across the halves, below the window", clip, 100, 50, map[image.Point]color.NRGBA{
		{5, 5}: red, {45, 45}: red, {55, 5}: blue, {95, 45}: blue,
	})
	full := shot(client.ScreenshotRequest{Width: 400, Height: 300, FullPage: true})
	expect("the full page", full, 400, 1500, map[image.Point]color.NRGBA{{10, 1490}: red, {390, 1490}: blue})

	// The CLI writes the file.
	file := filepath.Join(t.TempDir(), "shot.png")
	if _, stderr, code := d.cli("", "service", "screenshot", sb.ID, "page", "-o", file, "--width", "200", "--height", "100"); code != 0 {
		t.Fatalf("hutch service screenshot: %d %s", code, stderr)
	}
	if b, err := os.ReadFile(file); err != nil {
		t.Error(err)
	} else if img, err := png.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() != 200 {
		t.Errorf("the CLI's screenshot: %v", err)
	}

	// Bad requests say what is wrong.
	if _, err := d.client.Screenshot(ctx, sb.ID, "page", client.ScreenshotRequest{FullPage: true, Clip: &client.Clip{W: 1, H: 1}}); !client.IsInvalidArgument(err) || !strings.Contains(err.Error(), "not both") {
		t.Errorf("clip and full_page: %v", err)
	}
	if _, err := d.client.Screenshot(ctx, sb.ID, "nosuch", client.ScreenshotRequest{}); !client.IsNotFound(err) {
		t.Errorf("a service that is not there: %v", err)
	}
	browserSandbox(t, d)
}

// browserSandbox checks the browser sandbox screenshots made in the
// daemon's default workspace: of the browser template, without network.
func browserSandbox(t *testing.T, d *daemon) {
	t.Helper()
	all, err := d.client.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(sb client.Sandbox) bool { return sb.Key == "hutch-screenshots" })
	switch {
	case i < 0:
		t.Errorf("no browser sandbox among %+v", all)
	case all[i].Template != "browser" || all[i].Network.Mode != client.NetworkNone:
		t.Errorf("the browser sandbox: %+v", all[i])
	}
}
