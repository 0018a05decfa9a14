// Package logring keeps the daemon's most recent warnings and errors in
// memory, so that GET /v1/health can show an operator what went wrong
// lately without a shell on the host. A Ring is fed by a slog.Handler
// that wraps the daemon's own: every record still goes where it went, and
// those at slog.LevelWarn or above are also copied into the ring.
//
// What the ring holds is what the handler it wraps would have written, so
// it must sit behind the redacting handler (internal/base/redact): the
// records it sees then carry no secret value. They may still name other
// workspaces' sandboxes, so only the administrator reads them (the API's
// health route decides).
package logring

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
	"unicode/utf8"
)

// MinLevel is the least severe level the ring keeps.
const MinLevel = slog.LevelWarn

// maxText bounds a record's message and each attribute's value in the
// ring: an error may carry a command's whole output, and the ring is read
// on every health call.
const maxText = 2048

// Record is one log record as kept: its attributes flattened to text,
// group names joined to their keys with dots ("req.method").
type Record struct {
	Time    time.Time
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// Ring is a bounded, concurrency-safe buffer of the latest records.
type Ring struct {
	mu   sync.Mutex
	buf  []Record // len(buf) == cap once full; next is then the oldest
	next int
	size int
}

// New returns a ring that keeps the last size records (at least one).
func New(size int) *Ring {
	return &Ring{size: max(size, 1)}
}

// Records returns the kept records, oldest first, newest last. The caller
// owns the slice and its records.
func (r *Ring) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Record, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	out = append(out, r.buf[:r.next]...)
	for i := range out {
		out[i].Attrs = maps.Clone(out[i].Attrs)
	}
	return out
}

// add keeps rec, dropping the oldest record when the ring is full.
func (r *Ring) add(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < r.size {
		r.buf = append(r.buf, rec)
		return
	}
	r.buf[r.next] = rec
	r.next = (r.next + 1) % r.size
}

// Handler returns a slog.Handler that passes every record to next (nil
// discards), as next would have it, and keeps those at MinLevel or above
// in r, even when next's level is set higher.
func (r *Ring) Handler(next slog.Handler) slog.Handler {
	if next == nil {
		next = slog.DiscardHandler
	}
	return &handler{ring: r, next: next}
}

// handler is the slog.Handler Ring.Handler returns.
type handler struct {
	ring *Ring
	next slog.Handler
	// prefix is the open groups' names, each followed by a dot.
	prefix string
	// attrs are those given through WithAttrs, flattened; shared between
	// handlers derived from one another, so never written to in place.
	attrs []attr
}

// attr is a flattened attribute.
type attr struct{ key, value string }

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= MinLevel || h.next.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= MinLevel {
		kept := Record{Time: rec.Time, Level: rec.Level, Message: clip(rec.Message), Attrs: make(map[string]string, len(h.attrs)+rec.NumAttrs())}
		for _, a := range h.attrs {
			kept.Attrs[a.key] = a.value
		}
		rec.Attrs(func(a slog.Attr) bool {
			for _, f := range flatten(h.prefix, a, nil) {
				kept.Attrs[f.key] = f.value
			}
			return true
		})
		h.ring.add(kept)
	}
	// Enabled said yes for the ring's sake; next may not want it.
	if !h.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.next.Handle(ctx, rec)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	flat := h.attrs[:len(h.attrs):len(h.attrs)]
	for _, a := range attrs {
		flat = flatten(h.prefix, a, flat)
	}
	return &handler{ring: h.ring, next: h.next.WithAttrs(attrs), prefix: h.prefix, attrs: flat}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{ring: h.ring, next: h.next.WithGroup(name), prefix: h.prefix + name + ".", attrs: h.attrs}
}

// flatten appends a, under prefix, to out as text: a group's attributes
// each under its name, as slog's handlers do (an empty attribute is
// dropped, a group with no key inlined).
func flatten(prefix string, a slog.Attr, out []attr) []attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range v.Group() {
			out = flatten(prefix, g, out)
		}
		return out
	}
	if a.Key == "" && v.Equal(slog.Value{}) {
		return out
	}
	return append(out, attr{key: prefix + a.Key, value: clip(v.String())})
}

// clip bounds s to maxText bytes, cut at a rune's start, and says so.
func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	cut := maxText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
