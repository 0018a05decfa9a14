package api

import (
	"net/http"
	"strconv"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/net/netproxy"
)

// A sandbox's network policy, and the refusals it made.

// createNetwork is the policy a create asks for (nil: the daemon's
// default). The core holds it to the caller's key's ceiling
// (create.Options.NetworkCeiling), as it does every create path's.
func createNetwork(p *client.NetworkPolicy) *netpolicy.Policy {
	if p == nil {
		return nil
	}
	return &netpolicy.Policy{Mode: netpolicy.Mode(p.Mode), Allow: p.Allow, Deny: p.Deny}
}

// keyAllows returns p as the core takes it, if the caller's key may ask for
// its mode.
func (s *Server) keyAllows(r *http.Request, p client.NetworkPolicy) (netpolicy.Policy, error) {
	pol := netpolicy.Policy{Mode: netpolicy.Mode(p.Mode), Allow: p.Allow, Deny: p.Deny}
	if c := callerOf(r.Context()); !c.admin && !pol.Mode.AtMost(c.networkMode) {
		return pol, errdefs.PermissionDenied("key %s may give sandboxes network mode %s at most, not %q", c.key, c.networkMode, p.Mode)
	}
	return pol, nil
}

// networkEvents lists a sandbox's refused connections and lookups after
// ?after= (JSON), or follows them as server-sent events ("refusal", each
// with its id) when the client accepts them.
func (s *Server) networkEvents(w http.ResponseWriter, r *http.Request) {
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		var err error
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeError(w, r, s.log, errdefs.InvalidArgument("after must be an event id (a number), got %q", v))
			return
		}
	}
	log, err := s.nets.Events(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if !acceptsEvents(r) {
		evs, cursor := log.After(after)
		writeJSON(w, http.StatusOK, client.NetworkEvents{Events: networkEventsJSON(evs, cursor), Cursor: cursor})
		return
	}
	sse := &sseWriter{w: w}
	sse.begin()
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	for {
		evs, cursor, err := log.Wait(r.Context(), after)
		if err != nil {
			return // the client went
		}
		for _, ev := range networkEventsJSON(evs, cursor) {
			if err := sse.event("refusal", ev); err != nil {
				return
			}
		}
		after = cursor
	}
}

// networkEventsJSON numbers evs, the events up to cursor.
func networkEventsJSON(evs []netproxy.Event, cursor uint64) []client.NetworkEvent {
	out := make([]client.NetworkEvent, 0, len(evs))
	id := cursor - uint64(len(evs))
	for _, ev := range evs {
		id++
		out = append(out, client.NetworkEvent{ID: id, Time: ev.Time, Kind: ev.Kind, Dest: ev.Dest, Rule: ev.Rule, Reason: ev.Reason})
	}
	return out
}
