// Package spans starts the OpenTelemetry spans of a call's steps, as
// children of the span its context carries (a request's, which the API
// starts), with the trace API alone: the packages that call it stay free
// of the SDK and its exporters (internal/base/telemetry), and without a
// span in the context every call is the API's no-op.
package spans

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// scope names the tracer of Hutch's spans.
const scope = "github.com/hutchdev/hutch"

// Start starts a span named name, a child of ctx's, with attrs.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(scope).Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, marked failed when err is not nil: its status says the
// error's kind (not found, conflict, …), never its message, which may
// name what a caller keeps to itself.
func End(span trace.Span, err error) {
	if err != nil {
		kind := "error"
		if k := errdefs.Kind(err); k != nil {
			kind = k.Error()
		}
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}

// Attribute keys of Hutch's spans.
const (
	Sandbox   = attribute.Key("hutch.sandbox.id")
	Workspace = attribute.Key("hutch.workspace")
	Template  = attribute.Key("hutch.template")
	Runtime   = attribute.Key("hutch.runtime")
)
