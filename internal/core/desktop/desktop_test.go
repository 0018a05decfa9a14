package desktop

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

func at(n int) *int { return &n }

// TestActionCommands checks each action's xdotool command lines, and that
// what the screen cannot take is refused.
func TestActionCommands(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a    Action
		want [][]string
	}{
		{Action{Type: Move, X: at(10), Y: at(20)}, [][]string{{"mousemove", "--sync", "10", "20"}}},
		{Action{Type: Click}, [][]string{{"click", "--repeat", "1", "1"}}},
		{Action{Type: DoubleClick, X: at(1), Y: at(2), Button: "right"}, [][]string{{"mousemove", "--sync", "1", "2"}, {"click", "--repeat", "2", "3"}}},
		{Action{Type: TripleClick}, [][]string{{"click", "--repeat", "3", "1"}}},
		{Action{Type: MouseDown, Button: "middle"}, [][]string{{"mousedown", "2"}}},
		{Action{Type: Drag, Path: []Point{{1, 1}, {5, 5}, {9, 9}}}, [][]string{
			{"mousemove", "--sync", "1", "1"}, {"mousedown", "1"}, {"mousemove", "--sync", "5", "5"}, {"mousemove", "--sync", "9", "9"}, {"mouseup", "1"},
		}},
		{Action{Type: Scroll, Direction: "down"}, [][]string{{"click", "--repeat", "3", "5"}}},
		{Action{Type: Scroll, Direction: "left", Amount: 2, X: at(3), Y: at(4)}, [][]string{{"mousemove", "--sync", "3", "4"}, {"click", "--repeat", "2", "6"}}},
		{Action{Type: Type, Text: "--help; rm -rf / 'x'"}, [][]string{{"type", "--delay", "12", "--", "--help; rm -rf / 'x'"}}},
		{Action{Type: Key, Keys: "Ctrl+Shift+t"}, [][]string{{"key", "ctrl+shift+t"}}},
		{Action{Type: Key, Keys: "enter"}, [][]string{{"key", "Return"}}},
		{Action{Type: Key, Keys: "ctrl++"}, [][]string{{"key", "ctrl+plus"}}},
		{Action{Type: Wait, Ms: 250}, [][]string{{"sleep", "0.250"}}},
	}
	for _, c := range cases {
		got, err := c.a.commands(100, 100)
		if err != nil {
			t.Errorf("%+v: %v", c.a, err)
			continue
		}
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%+v: got %q, want %q", c.a, got, c.want)
		}
	}
	bad := []Action{
		{Type: Move},
		{Type: Click, X: at(1)},
		{Type: Click, X: at(100), Y: at(0)},
		{Type: Click, X: at(-1), Y: at(0)},
		{Type: Click, Button: "fourth"},
		{Type: Drag, Path: []Point{{1, 1}}},
		{Type: Drag, Path: []Point{{1, 1}, {200, 1}}},
		{Type: Scroll, Direction: "sideways"},
		{Type: Scroll, Direction: "up", Amount: 51},
		{Type: Type},
		{Type: Type, Text: strings.Repeat("a", MaxTextLen+1)},
		{Type: Key},
		{Type: Key, Keys: "--window 1"},
		{Type: Key, Keys: "ctrl+$(id)"},
		{Type: Wait, Ms: 10_001},
		{Type: "teleport"},
	}
	for _, a := range bad {
		if _, err := a.commands(100, 100); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: got %v, want an invalid argument", a, err)
		}
	}
}

// TestShellQuote runs what shellQuote makes through a real sh: every
// string comes back as it was, whatever it holds.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"", "plain", "it's", "'", "''", "$(id)", "`id`", "a\nb", `\'`, "--", "*", "é ü 日本"} {
		out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("%q came back as %q", s, out)
		}
	}
}

// TestActionString says actions for a person, typed text cut short.
func TestActionString(t *testing.T) {
	t.Parallel()
	for a, want := range map[*Action]string{
		{Type: Click, X: at(3), Y: at(4), Button: "right"}:  "click at 3,4 (right)",
		{Type: Type, Text: strings.Repeat("x", 50)}:         `type "` + strings.Repeat("x", 40) + `…"`,
		{Type: Key, Keys: "ctrl+a"}:                         "key ctrl+a",
		{Type: Drag, Path: []Point{{1, 2}, {3, 4}, {5, 6}}}: "drag 1,2 to 5,6",
	} {
		if got := a.String(); got != want {
			t.Errorf("%+v: %q, want %q", *a, got, want)
		}
	}
}

// TestScale shrinks a PNG by half.
func TestScale(t *testing.T) {
	t.Parallel()
	img := image.NewRGBA(image.Rect(0, 0, 64, 40))
	for x := range 64 {
		for y := range 40 {
			img.Set(x, y, color.RGBA{R: 200, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	out, err := scale(b.Bytes(), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got.Bounds().Dx() != 32 || got.Bounds().Dy() != 20 {
		t.Errorf("scaled to %v, want 32x20", got.Bounds())
	}
	if r, _, _, _ := got.At(10, 10).RGBA(); r>>8 != 200 {
		t.Errorf("a pixel's red is %d, want 200", r>>8)
	}
}

// TestAttackDesktopScreenshotBomb: the screenshot the daemon scales is a
// file of the sandbox's, which the tenant may replace. A PNG whose header
// claims a picture far larger than any screen (a few hundred bytes that
// would decode to gigabytes) is refused from its header, before anything
// is allocated for it.
func TestAttackDesktopScreenshotBomb(t *testing.T) {
	t.Parallel()
	_, err := scale(pngHeader(100_000, 100_000), 0.5)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "100000x100000") {
		t.Fatalf("a 100000x100000 PNG: got %v, want it refused for its size", err)
	}
	if _, err := scale([]byte("not a png"), 0.5); err == nil {
		t.Fatal("no PNG at all was scaled")
	}
}

// pngHeader is the start of a PNG of w×h: its signature and IHDR chunk.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk := append([]byte("IHDR"), ihdr...)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	b.Write(chunk)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// TestParse reads xdotool's answers.
func TestParse(t *testing.T) {
	t.Parallel()
	size, err := parseSize([]byte("1280 800\n"))
	if err != nil || size != (Size{1280, 800}) {
		t.Errorf("parseSize: %v %v", size, err)
	}
	p, err := parseCursor([]byte("X=12\nY=34\nSCREEN=0\nWINDOW=123\n"))
	if err != nil || p != (Point{12, 34}) {
		t.Errorf("parseCursor: %v %v", p, err)
	}
	if _, err := parseSize([]byte("Error: can't open display")); err == nil {
		t.Error("parseSize took an error message")
	}
}

// TestActionScript chains what one xdotool can run, each type and key
// ending its chain, the screenshot after the actions and the pointer's
// place last.
func TestActionScript(t *testing.T) {
	t.Parallel()
	script, waited, err := actionScript([]Action{
		{Type: Click, X: at(1), Y: at(2)},
		{Type: Type, Text: "it's"},
		{Type: Key, Keys: "Return"},
		{Type: Wait, Ms: 100},
		{Type: Move, X: at(3), Y: at(4)},
	}, Size{100, 100}, &Shot{})
	if err != nil {
		t.Fatal(err)
	}
	want := "set -e\nexport DISPLAY=:0\n" +
		"xdotool 'mousemove' '--sync' '1' '2' 'click' '--repeat' '1' '1' 'type' '--delay' '12' '--' 'it'\\''s'\n" +
		"xdotool 'key' 'Return'\n" +
		"xdotool 'sleep' '0.100' 'mousemove' '--sync' '3' '4'\n" +
		"scrot --overwrite --pointer /tmp/.hutch-desktop-screenshot.png\n" +
		"xdotool 'getmouselocation' '--shell'\n"
	if script != want {
		t.Errorf("got\n%s\nwant\n%s", script, want)
	}
	if waited != 100*time.Millisecond+4*typingDelay*time.Millisecond {
		t.Errorf("waited %v", waited)
	}
	one, _, err := actionScript([]Action{{Type: Move, X: at(5), Y: at(6)}}, Size{100, 100}, nil)
	if err != nil || !strings.HasSuffix(one, "xdotool 'mousemove' '--sync' '5' '6' 'getmouselocation' '--shell'\n") {
		t.Errorf("one move: %q %v", one, err)
	}
	if _, _, err := actionScript([]Action{{Type: Move, X: at(5), Y: at(6)}, {Type: Click, X: at(500), Y: at(1)}}, Size{100, 100}, nil); err == nil || !strings.Contains(err.Error(), "action 2 (click)") {
		t.Errorf("an action off the screen: %v", err)
	}
}

// A command that found no display, in each tool's words, is the desktop
// not running (then seen again once back, as after a wake); another
// failure is not.
func TestNoDisplay(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		"Can't open display: :0":                                   true,
		"scrot: Can't open X display. It *is* running, yeah? [:0]": true,
		"xwininfo: error: unable to open display \":0\"":           true,
		"Error: cannot open display: :0":                           true,
		"scrot: failed to write /tmp/x.png":                        false,
	} {
		if got := noDisplay(msg); got != want {
			t.Errorf("noDisplay(%q) = %v, want %v", msg, got, want)
		}
	}
}
