package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/desktop"
)

// A sandbox's desktop: POST starts it, GET tells it, DELETE ends it;
// …/screenshot is a PNG of the screen, …/actions does a list of actions,
// …/stream makes a link to the live view.

// Desktops drives the sandboxes' desktops (*desktop.Service).
type Desktops interface {
	Start(ctx context.Context, id string, size desktop.Size) (desktop.Status, error)
	Status(ctx context.Context, id string) (desktop.Status, error)
	Stop(ctx context.Context, id string) error
	Screenshot(ctx context.Context, id string, shot desktop.Shot) ([]byte, error)
	Act(ctx context.Context, id string, actions []desktop.Action, shot *desktop.Shot) (desktop.Result, error)
}

// withDesktops is a desktop route's handler: in a daemon without desktops
// it answers that they are off.
func (s *Server) withDesktops(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.desktops == nil {
			writeError(w, r, s.log, errdefs.NotImplemented("desktops are off in this daemon"))
			return
		}
		h(w, r)
	}
}

func desktopJSON(st desktop.Status) client.Desktop {
	out := client.Desktop{Running: st.Running, Cursor: client.Point(st.Cursor), Recent: []client.DesktopEvent{}}
	if st.Running {
		out.Width, out.Height = st.Size.Width, st.Size.Height
	}
	for _, d := range st.Recent {
		out.Recent = append(out.Recent, client.DesktopEvent(d))
	}
	return out
}

func (s *Server) startDesktop(w http.ResponseWriter, r *http.Request) {
	var req client.DesktopRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decode(r, &req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	st, err := s.desktops.Start(r.Context(), r.PathValue("id"), desktop.Size{Width: req.Width, Height: req.Height})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, desktopJSON(st))
}

func (s *Server) getDesktop(w http.ResponseWriter, r *http.Request) {
	st, err := s.desktops.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, desktopJSON(st))
}

func (s *Server) stopDesktop(w http.ResponseWriter, r *http.Request) {
	if err := s.desktops.Stop(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// desktopShot reads a screenshot's region (x, y, w, h) and scale from a
// query.
func desktopShot(r *http.Request) (desktop.Shot, error) {
	q := r.URL.Query()
	var shot desktop.Shot
	if v := q.Get("scale"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return shot, errdefs.InvalidArgument("scale %q is not a number", v)
		}
		shot.Scale = f
	}
	if !q.Has("x") && !q.Has("y") && !q.Has("w") && !q.Has("h") {
		return shot, nil
	}
	var n [4]int
	for i, k := range []string{"x", "y", "w", "h"} {
		v, err := strconv.Atoi(q.Get(k))
		if err != nil {
			return shot, errdefs.InvalidArgument("a region needs x, y, w and h, whole numbers of pixels; %s is %q", k, q.Get(k))
		}
		n[i] = v
	}
	shot.Region = &desktop.Rect{X: n[0], Y: n[1], Width: n[2], Height: n[3]}
	return shot, nil
}

func (s *Server) desktopScreenshot(w http.ResponseWriter, r *http.Request) {
	shot, err := desktopShot(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	png, err := s.desktops.Screenshot(r.Context(), r.PathValue("id"), shot)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(png)
}

func (s *Server) desktopActions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Actions    []desktop.Action `json:"actions"`
		Screenshot *struct {
			Region *client.Clip `json:"region"`
			Scale  float64      `json:"scale"`
		} `json:"screenshot"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var shot *desktop.Shot
	if sh := req.Screenshot; sh != nil {
		shot = &desktop.Shot{Scale: sh.Scale}
		if c := sh.Region; c != nil {
			shot.Region = &desktop.Rect{X: c.X, Y: c.Y, Width: c.W, Height: c.H}
		}
	}
	res, err := s.desktops.Act(r.Context(), r.PathValue("id"), req.Actions, shot)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, client.DesktopActionsResult{Cursor: client.Point(res.Cursor), Screenshot: res.Screenshot})
}

// streamServices makes sure sandbox id has its live view's services. A
// sandbox that has them is not woken (a link's first request wakes it);
// one whose display runs without them (E2B's SDK started it) gets them.
func (s *Server) streamServices(ctx context.Context, id string) error {
	_, err := s.execs.Service(ctx, id, desktop.ViewService)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	st, err := s.desktops.Status(ctx, id)
	if err != nil {
		return err
	}
	if !st.Running {
		return errdefs.FailedPrecondition("the desktop is not running: POST /v1/sandboxes/%s/desktop starts it", id)
	}
	_, err = s.desktops.Start(ctx, id, desktop.Size{})
	return err
}

// streamPage is noVNC's page, connecting at once, scaled to its frame,
// reconnecting after a wake; view_only is added for a view-only link (the
// server behind it ignores input anyway).
const streamPage = "vnc.html?autoconnect=true&resize=scale&reconnect=true&reconnect_delay=1000"

func (s *Server) desktopStream(w http.ResponseWriter, r *http.Request) {
	var req client.DesktopStreamRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decode(r, &req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	ttl, err := linkTTL(req.ExpiresInS)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	id := r.PathValue("id")
	if err := s.streamServices(r.Context(), id); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	name, page := desktop.ViewService, streamPage+"&view_only=true"
	if req.Control {
		name, page = desktop.ControlService, streamPage
	}
	link, err := s.link(r.Context(), id, name, page, ttl)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, client.DesktopStream{URL: link.URL, Control: req.Control, ExpiresAt: link.ExpiresAt})
}
