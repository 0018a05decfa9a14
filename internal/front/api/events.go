package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/webhooks"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Events are the sandboxes' lifecycle events (internal/core/events).
type Events interface {
	List(ctx context.Context, f store.EventFilter) ([]*store.Event, error)
	Wait(ctx context.Context, f store.EventFilter) ([]*store.Event, error)
}

// Webhooks keeps the workspaces' webhooks (internal/core/webhooks).
type Webhooks interface {
	Create(ctx context.Context, ws, url string, types []string, secret string) (webhooks.Webhook, error)
	List(ctx context.Context, ws string) ([]webhooks.Webhook, error)
	Delete(ctx context.Context, ws, id string) error
	Deliveries(ctx context.Context, ws, id string, limit int) ([]*store.Delivery, error)
}

// listEvents answers GET /v1/events: the caller's workspace's events (the
// administrator's: every workspace's, or ?workspace=), after ?after= or
// the Last-Event-ID a reconnecting stream sends, of ?sandbox= when
// given (deleted ones' too: another workspace's has none the caller
// sees); a stream of them, as they come, for Accept: text/event-stream.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	if s.events == nil {
		writeError(w, r, s.log, errdefs.NotImplemented("this daemon keeps no events"))
		return
	}
	f := store.EventFilter{Workspace: callerOf(r.Context()).filter(r), Sandbox: r.URL.Query().Get("sandbox")}
	after := r.URL.Query().Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after = id
	}
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, s.log, errdefs.InvalidArgument("after (or Last-Event-ID) must be an event id, got %q", after))
			return
		}
		f.After = n
	}
	limit, err := intParam(r, "limit", 100)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	f.Limit = min(max(limit, 1), 1000)
	if !acceptsEvents(r) {
		evs, err := s.events.List(r.Context(), f)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		out := client.Events{Events: []client.Event{}}
		for _, ev := range evs {
			out.Events = append(out.Events, eventJSON(ev))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	sse := &sseWriter{w: w}
	sse.begin()
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	for {
		evs, err := s.events.Wait(r.Context(), f)
		if err != nil {
			return // the client went
		}
		for _, ev := range evs {
			if err := sse.eventWithID(strconv.FormatInt(ev.ID, 10), ev.Type, eventJSON(ev)); err != nil {
				return
			}
			f.After = ev.ID
		}
	}
}

func eventJSON(ev *store.Event) client.Event {
	return client.Event{ID: ev.ID, Time: ev.Time, Type: ev.Type, Workspace: ev.Workspace, SandboxID: ev.Sandbox,
		Reason: ev.Reason, Message: ev.Message, Data: ev.Data}
}

// createWebhook answers POST /v1/webhooks: a webhook of the caller's
// workspace, its secret told this once.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhooks == nil {
		writeError(w, r, s.log, errdefs.NotImplemented("this daemon sends no webhooks"))
		return
	}
	var req client.CreateWebhookRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	wh, err := s.webhooks.Create(r.Context(), callerOf(r.Context()).workspace, req.URL, req.Events, req.Secret)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	noteObject(r, wh.ID)
	writeJSON(w, http.StatusCreated, webhookJSON(wh))
}

// listWebhooks answers GET /v1/webhooks: the caller's workspace's (the
// administrator's: every workspace's, or ?workspace=), without secrets.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	if s.webhooks == nil {
		writeJSON(w, http.StatusOK, []client.Webhook{})
		return
	}
	list, err := s.webhooks.List(r.Context(), callerOf(r.Context()).filter(r))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := []client.Webhook{}
	for _, wh := range list {
		out = append(out, webhookJSON(wh))
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteWebhook answers DELETE /v1/webhooks/{webhook}.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhooks == nil {
		writeError(w, r, s.log, errdefs.NotFound("webhook %s not found", r.PathValue("webhook")))
		return
	}
	if err := s.webhooks.Delete(r.Context(), callerOf(r.Context()).workspace, r.PathValue("webhook")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// webhookDeliveries answers GET /v1/webhooks/{webhook}/deliveries: its
// latest attempts, newest first.
func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	if s.webhooks == nil {
		writeError(w, r, s.log, errdefs.NotFound("webhook %s not found", r.PathValue("webhook")))
		return
	}
	limit, err := intParam(r, "limit", 100)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	ds, err := s.webhooks.Deliveries(r.Context(), callerOf(r.Context()).workspace, r.PathValue("webhook"), min(max(limit, 1), 1000))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := []client.WebhookDelivery{}
	for _, d := range ds {
		out = append(out, client.WebhookDelivery{EventID: d.Event, Attempt: d.Attempt, Time: d.Time, Status: d.Status, Error: d.Error,
			DurationMS: float64(d.Duration) / float64(time.Millisecond)})
	}
	writeJSON(w, http.StatusOK, out)
}

func webhookJSON(wh webhooks.Webhook) client.Webhook {
	return client.Webhook{ID: wh.ID, URL: wh.URL, Events: wh.Types, Workspace: wh.Workspace, CreatedAt: wh.CreatedAt, Secret: wh.Secret}
}
