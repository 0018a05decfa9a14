package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DesktopRequest starts a sandbox's desktop at a screen size (default
// 1024×768). The sandbox's template must have one (template desktop).
type DesktopRequest struct {
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// Desktop is a sandbox's desktop as it is: whether it runs, the screen's
// size, the pointer, and the latest actions done on it.
type Desktop struct {
	Running bool           `json:"running"`
	Width   int            `json:"width,omitempty"`
	Height  int            `json:"height,omitempty"`
	Cursor  Point          `json:"cursor"`
	Recent  []DesktopEvent `json:"recent_actions"`
}

// DesktopEvent is an action done on a desktop, said for a person.
type DesktopEvent struct {
	Time   time.Time `json:"time"`
	Action string    `json:"action"`
}

// Point is a place on a screen, in pixels from its top left corner.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// DesktopAction is one step of what an agent does on a desktop. Type is
// move, click, double_click, triple_click, mouse_down, mouse_up, drag,
// scroll, type, key or wait; the other fields are the ones it takes.
type DesktopAction struct {
	Type string `json:"type"`
	// X and Y: where the pointer goes first (omitted: where it is).
	X *int `json:"x,omitempty"`
	Y *int `json:"y,omitempty"`
	// Button is left (default), middle or right.
	Button string `json:"button,omitempty"`
	// Path is a drag's points, from the first to the last.
	Path []Point `json:"path,omitempty"`
	// Direction (up, down, left, right) and Amount (default 3) of a
	// scroll.
	Direction string `json:"direction,omitempty"`
	Amount    int    `json:"amount,omitempty"`
	// Text is what a type action types; Keys the chord a key action
	// presses ("ctrl+a", "Return").
	Text string `json:"text,omitempty"`
	Keys string `json:"keys,omitempty"`
	// Ms is how long a wait lasts.
	Ms int `json:"ms,omitempty"`
}

// At is a pointer to n, for DesktopAction's X and Y.
func At(n int) *int { return &n }

// DesktopShot says what a screenshot shows: a region of the screen (nil:
// all of it), scaled down by Scale (0 < Scale ≤ 1; 0 is 1).
type DesktopShot struct {
	Region *Clip   `json:"region,omitempty"`
	Scale  float64 `json:"scale,omitempty"`
}

// DesktopActionsRequest is a list of actions, done in order; with
// Screenshot, the answer has a screenshot taken after them.
type DesktopActionsRequest struct {
	Actions    []DesktopAction `json:"actions"`
	Screenshot *DesktopShot    `json:"screenshot,omitempty"`
}

// DesktopActionsResult is where the pointer is after the actions, and the
// screenshot (PNG) when one was asked for.
type DesktopActionsResult struct {
	Cursor     Point  `json:"cursor"`
	Screenshot []byte `json:"screenshot,omitempty"`
}

// DesktopStreamRequest asks for a link to a desktop's live view:
// view-only unless Control, for ExpiresInS seconds (default an hour).
type DesktopStreamRequest struct {
	Control    bool `json:"control,omitempty"`
	ExpiresInS int  `json:"expires_in_s,omitempty"`
}

// DesktopStream is a link to a desktop's live view in a browser (noVNC),
// a preview link of its own origin.
type DesktopStream struct {
	URL       string    `json:"url"`
	Control   bool      `json:"control"`
	ExpiresAt time.Time `json:"expires_at"`
}

// StartDesktop starts sandbox id's desktop (left as it is when it runs)
// and returns once it shows.
func (c *Client) StartDesktop(ctx context.Context, id string, req DesktopRequest) (Desktop, error) {
	var out Desktop
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "desktop"), json: req}, &out)
	return out, err
}

// Desktop tells sandbox id's desktop.
func (c *Client) Desktop(ctx context.Context, id string) (Desktop, error) {
	var out Desktop
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "desktop")}, &out)
	return out, err
}

// StopDesktop ends sandbox id's desktop and its live view.
func (c *Client) StopDesktop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id, "desktop")}, nil)
}

// DesktopScreenshot returns a PNG of sandbox id's screen.
func (c *Client) DesktopScreenshot(ctx context.Context, id string, shot DesktopShot) ([]byte, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if r := shot.Region; r != nil {
		q.Set("x", strconv.Itoa(r.X))
		q.Set("y", strconv.Itoa(r.Y))
		q.Set("w", strconv.Itoa(r.W))
		q.Set("h", strconv.Itoa(r.H))
	}
	if shot.Scale != 0 {
		q.Set("scale", strconv.FormatFloat(shot.Scale, 'g', -1, 64))
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: sandboxPath(id, "desktop") + "/screenshot", query: q, accept: "image/png"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}

// DesktopActions does actions on sandbox id's desktop, in order, and
// answers when they are done.
func (c *Client) DesktopActions(ctx context.Context, id string, req DesktopActionsRequest) (DesktopActionsResult, error) {
	var out DesktopActionsResult
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "desktop") + "/actions", json: req}, &out)
	return out, err
}

// DesktopStream returns a link to sandbox id's live desktop.
func (c *Client) DesktopStream(ctx context.Context, id string, req DesktopStreamRequest) (DesktopStream, error) {
	var out DesktopStream
	if err := checkID(id); err != nil {
		return out, err
	}
	err := c.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "desktop") + "/stream", json: req}, &out)
	return out, err
}
