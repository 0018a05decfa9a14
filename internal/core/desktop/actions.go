package desktop

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Action kinds: what computer-use models are trained to ask for
// (Anthropic's computer tool, OpenAI's computer-use), one to one.
const (
	Move        = "move"
	Click       = "click"
	DoubleClick = "double_click"
	TripleClick = "triple_click"
	MouseDown   = "mouse_down"
	MouseUp     = "mouse_up"
	Drag        = "drag"
	Scroll      = "scroll"
	Type        = "type"
	Key         = "key"
	Wait        = "wait"
)

// Action is one step of what an agent does on the desktop.
type Action struct {
	Type string `json:"type"`
	// X and Y: where the pointer goes first (move, clicks, mouse_down,
	// mouse_up and scroll; omitted: where it is).
	X *int `json:"x,omitempty"`
	Y *int `json:"y,omitempty"`
	// Button: left (default), right or middle.
	Button string `json:"button,omitempty"`
	// Path: a drag's points, from the first to the last (at least two).
	Path []Point `json:"path,omitempty"`
	// Direction (up, down, left, right) and Amount (clicks of the wheel,
	// default 3) of a scroll.
	Direction string `json:"direction,omitempty"`
	Amount    int    `json:"amount,omitempty"`
	// Text to type.
	Text string `json:"text,omitempty"`
	// Keys: a chord ("ctrl+a", "Return", "alt+F4"), pressed and released.
	Keys string `json:"keys,omitempty"`
	// Ms: how long a wait lasts (at most MaxWait).
	Ms int `json:"ms,omitempty"`
}

// Point is a place on the screen, in pixels from its top left corner.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Bounds of what one call may ask.
const (
	MaxActions  = 100
	MaxTextLen  = 10_000
	MaxWait     = 10 * time.Second
	maxScroll   = 50
	typingDelay = 12 // ms between keystrokes, xdotool's default
)

var buttons = map[string]string{"": "1", "left": "1", "middle": "2", "right": "3"}

// wheel is the X button a scroll direction turns the wheel by.
var wheel = map[string]string{"up": "4", "down": "5", "left": "6", "right": "7"}

// keyAliases are the names models and E2B's Desktop SDK use for keys,
// lower-cased, with the X keysym each stands for; any other name is taken
// as a keysym (Return, Page_Down, F5, a, …).
var keyAliases = map[string]string{
	"alt": "alt", "alt_l": "Alt_L", "alt_r": "Alt_R", "backspace": "BackSpace", "break": "Pause",
	"caps_lock": "Caps_Lock", "cmd": "super", "command": "super", "control": "ctrl", "ctrl": "ctrl",
	"del": "Delete", "delete": "Delete", "down": "Down", "end": "End", "enter": "Return",
	"esc": "Escape", "escape": "Escape", "home": "Home", "insert": "Insert", "left": "Left",
	"menu": "Menu", "meta": "Meta_L", "num_lock": "Num_Lock", "page_down": "Page_Down",
	"pagedown": "Page_Down", "page_up": "Page_Up", "pageup": "Page_Up", "pause": "Pause",
	"print": "Print", "return": "Return", "right": "Right", "scroll_lock": "Scroll_Lock",
	"shift": "shift", "space": "space", "super": "super", "tab": "Tab", "up": "Up",
	"win": "super", "windows": "super",
}

// keysym is what one key of a chord may be named: never an option of
// xdotool's, never two words.
var keysym = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)

// chord turns "Ctrl+Shift+t" into xdotool's "ctrl+shift+t".
func chord(keys string) (string, error) {
	if keys == "" {
		return "", errdefs.InvalidArgument("a key action needs keys, such as \"ctrl+a\" or \"Return\"")
	}
	if keys == "+" || strings.HasSuffix(keys, "++") { // "ctrl++": the plus key
		keys = strings.TrimSuffix(keys, "+") + "plus"
	}
	parts := strings.Split(keys, "+")
	for i, k := range parts {
		if alias, ok := keyAliases[strings.ToLower(k)]; ok {
			parts[i] = alias
			continue
		}
		if !keysym.MatchString(k) {
			return "", errdefs.InvalidArgument("key %q of %q is not a key name (letters, digits and _, as X names them: Return, Page_Down, F5, a)", k, keys)
		}
	}
	return strings.Join(parts, "+"), nil
}

// commands are the xdotool command lines that do a, each an argv after
// "xdotool". w and h are the screen's size, which every point must be in.
func (a Action) commands(w, h int) ([][]string, error) {
	at := func(x, y int) ([]string, error) {
		if x < 0 || y < 0 || x >= w || y >= h {
			return nil, errdefs.InvalidArgument("(%d, %d) is off the %dx%d screen", x, y, w, h)
		}
		return []string{"mousemove", "--sync", strconv.Itoa(x), strconv.Itoa(y)}, nil
	}
	var cmds [][]string
	if a.Type != Drag && a.Type != Type && a.Type != Key && a.Type != Wait {
		switch {
		case a.X != nil && a.Y != nil:
			move, err := at(*a.X, *a.Y)
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, move)
		case a.X != nil || a.Y != nil:
			return nil, errdefs.InvalidArgument("a %s action needs both x and y, or neither", a.Type)
		case a.Type == Move:
			return nil, errdefs.InvalidArgument("a move action needs x and y")
		}
	}
	button, ok := buttons[a.Button]
	if !ok {
		return nil, errdefs.InvalidArgument("button %q is not left, middle or right", a.Button)
	}
	switch a.Type {
	case Move:
	case Click, DoubleClick, TripleClick:
		n := map[string]string{Click: "1", DoubleClick: "2", TripleClick: "3"}[a.Type]
		cmds = append(cmds, []string{"click", "--repeat", n, button})
	case MouseDown:
		cmds = append(cmds, []string{"mousedown", button})
	case MouseUp:
		cmds = append(cmds, []string{"mouseup", button})
	case Drag:
		if len(a.Path) < 2 {
			return nil, errdefs.InvalidArgument("a drag needs a path of at least two points")
		}
		for i, p := range a.Path {
			move, err := at(p.X, p.Y)
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, move)
			if i == 0 {
				cmds = append(cmds, []string{"mousedown", button})
			}
		}
		cmds = append(cmds, []string{"mouseup", button})
	case Scroll:
		b, ok := wheel[a.Direction]
		if !ok {
			return nil, errdefs.InvalidArgument("scroll direction %q is not up, down, left or right", a.Direction)
		}
		n := a.Amount
		if n == 0 {
			n = 3
		}
		if n < 1 || n > maxScroll {
			return nil, errdefs.InvalidArgument("scroll amount must be between 1 and %d", maxScroll)
		}
		cmds = append(cmds, []string{"click", "--repeat", strconv.Itoa(n), b})
	case Type:
		if a.Text == "" || len(a.Text) > MaxTextLen {
			return nil, errdefs.InvalidArgument("a type action needs text of 1 to %d bytes", MaxTextLen)
		}
		cmds = append(cmds, []string{"type", "--delay", strconv.Itoa(typingDelay), "--", a.Text})
	case Key:
		c, err := chord(a.Keys)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, []string{"key", c}) // a key name never starts with -
	case Wait:
		if a.Ms < 0 || time.Duration(a.Ms)*time.Millisecond > MaxWait {
			return nil, errdefs.InvalidArgument("a wait lasts 0 to %d ms", MaxWait.Milliseconds())
		}
		cmds = append(cmds, []string{"sleep", fmt.Sprintf("%.3f", float64(a.Ms)/1000)})
	default:
		return nil, errdefs.InvalidArgument("action type %q is not one of move, click, double_click, triple_click, mouse_down, mouse_up, drag, scroll, type, key, wait", a.Type)
	}
	return cmds, nil
}

// String says what a did, for the desktop's recent actions: what a person
// watching reads, the text typed cut short.
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(a.Type)
	if a.X != nil && a.Y != nil {
		fmt.Fprintf(&b, " at %d,%d", *a.X, *a.Y)
	}
	switch a.Type {
	case Type:
		t := []rune(a.Text)
		if len(t) > 40 {
			t = append(t[:40], '…')
		}
		fmt.Fprintf(&b, " %q", string(t))
	case Key:
		b.WriteString(" " + a.Keys)
	case Scroll:
		fmt.Fprintf(&b, " %s", a.Direction)
	case Drag:
		if len(a.Path) > 0 {
			first, last := a.Path[0], a.Path[len(a.Path)-1]
			fmt.Fprintf(&b, " %d,%d to %d,%d", first.X, first.Y, last.X, last.Y)
		}
	case Wait:
		fmt.Fprintf(&b, " %d ms", a.Ms)
	}
	if a.Button != "" && a.Button != "left" {
		b.WriteString(" (" + a.Button + ")")
	}
	return b.String()
}
