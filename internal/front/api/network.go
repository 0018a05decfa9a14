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
	after, err := cursorParam(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
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

// networkLog lists a sandbox's latest connections and lookups after
// ?after=, each with the rule that decided it.
func (s *Server) networkLog(w http.ResponseWriter, r *http.Request) {
	after, err := cursorParam(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	h, err := s.nets.History(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	entries, cursor := h.After(after)
	out := client.NetworkLog{Entries: make([]client.NetworkLogEntry, 0, len(entries)), Cursor: cursor}
	for _, e := range entries {
		out.Entries = append(out.Entries, client.NetworkLogEntry{
			Time: e.Time, Kind: e.Kind, Protocol: e.Protocol, Name: e.Name, Addr: e.Addr, Port: int(e.Port),
			Allowed: e.Allowed, Rule: e.Rule, Reason: e.Reason, BytesOut: e.BytesOut, BytesIn: e.BytesIn,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// networkProposal answers the smallest allow-list that would have let the
// sandbox's connections through: those made in mode learn (or, if it never
// was, those its log has), ready for PATCH network.
func (s *Server) networkProposal(w http.ResponseWriter, r *http.Request) {
	pol, err := s.nets.Proposal(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, client.NetworkPolicy{Mode: string(pol.Mode), Allow: append([]string{}, pol.Allow...)})
}

// cursorParam reads ?after=, a log's cursor (0 when not given).
func cursorParam(r *http.Request) (uint64, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, errdefs.InvalidArgument("after must be an entry's number, got %q", v)
	}
	return n, nil
}
