package redact

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
)

// NewHandler returns a slog.Handler that redacts every record with r's
// current set before passing it to next (nil next discards).
//
// It redacts the message, attribute keys and values, in groups too, and the
// attributes given through WithAttrs. Values of kind Any (errors, structs,
// slices) are passed on as their text form — an error's Error(), a []byte as
// text, anything else as fmt's "%+v" — so that what next writes is exactly
// what was checked: a JSON handler would otherwise marshal a struct's fields,
// which fmt may not show. Other kinds (numbers, times) keep their kind
// unless their text contains a secret.
//
// Attributes given through WithAttrs are redacted again when r's set changes,
// so a logger made before a secret was added does not leak it.
func NewHandler(next slog.Handler, r *Redactor) slog.Handler {
	if next == nil {
		next = slog.DiscardHandler
	}
	return &handler{next: next, r: r}
}

// handler is the slog.Handler NewHandler returns.
type handler struct {
	next slog.Handler // as given to NewHandler
	r    *Redactor
	ops  []handlerOp // WithGroup and WithAttrs calls, in order, to replay on next

	// built is next with ops applied, their attributes redacted with the
	// set it records; it is rebuilt when r's set changes.
	built atomic.Pointer[builtHandler]
}

// handlerOp is one WithGroup (group set) or WithAttrs (attrs set) call.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

// builtHandler is a handler's next with its ops applied under set.
type builtHandler struct {
	set *Set
	h   slog.Handler
}

// current returns next with h's ops applied, redacted with set.
func (h *handler) current(set *Set) slog.Handler {
	if len(h.ops) == 0 {
		return h.next
	}
	if b := h.built.Load(); b != nil && b.set == set {
		return b.h
	}
	next := h.next
	for _, op := range h.ops {
		if op.group != "" {
			next = next.WithGroup(op.group)
			continue
		}
		attrs := make([]slog.Attr, len(op.attrs))
		for i, a := range op.attrs {
			attrs[i] = redactAttr(set, a)
		}
		next = next.WithAttrs(attrs)
	}
	h.built.Store(&builtHandler{set: set, h: next})
	return next
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.current(h.r.Set()).Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	set := h.r.Set()
	out := slog.NewRecord(rec.Time, rec.Level, set.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(set, a))
		return true
	})
	return h.current(set).Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(handlerOp{attrs: append([]slog.Attr{}, attrs...)})
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(handlerOp{group: name})
}

// with returns a copy of h with op added.
func (h *handler) with(op handlerOp) *handler {
	ops := append(h.ops[:len(h.ops):len(h.ops)], op)
	return &handler{next: h.next, r: h.r, ops: ops}
}

// redactAttr returns a with its key and value redacted with set.
func redactAttr(set *Set, a slog.Attr) slog.Attr {
	a.Key = set.String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(set.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		attrs := make([]slog.Attr, len(group))
		for i, g := range group {
			attrs[i] = redactAttr(set, g)
		}
		a.Value = slog.GroupValue(attrs...)
	case slog.KindAny:
		a.Value = slog.StringValue(set.String(anyText(v.Any())))
	default:
		s := v.String()
		if r := set.String(s); r != s {
			a.Value = slog.StringValue(r)
		} else {
			a.Value = v
		}
	}
	return a
}

// anyText renders a value of kind Any as text. fmt recovers from a panicking
// Error or String method (a nil pointer), so this does not panic.
func anyText(x any) string {
	switch x := x.(type) {
	case error:
		return fmt.Sprint(x)
	case []byte:
		return string(x)
	default:
		return fmt.Sprintf("%+v", x)
	}
}
