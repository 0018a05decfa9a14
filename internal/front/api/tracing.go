package api

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hutchdev/hutch/internal/base/spans"
)

// Every route's call is a span (OpenTelemetry, when internal/base/telemetry
// turned it on), named by its route, continuing the caller's trace when
// it sent a traceparent; the kernel's steps are its children
// (internal/base/spans).

var tracer = otel.Tracer("github.com/hutchdev/hutch/internal/front/api")

// startSpan starts the span of r's call to route (a pattern: "POST
// /v1/sandboxes"), by caller c, and returns r carrying it.
func startSpan(r *http.Request, route string, c caller) (*http.Request, trace.Span) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method, path, _ := strings.Cut(route, " ")
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method), attribute.String("http.route", path),
		spans.Workspace.String(c.workspace),
	}
	if id := r.PathValue("id"); id != "" {
		attrs = append(attrs, spans.Sandbox.String(id))
	}
	if method == "*" {
		route = r.Method + " " + path
	}
	ctx, span := tracer.Start(ctx, route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return r.WithContext(ctx), span
}

// endSpan records how a call was answered: its status, and for an error
// its code; a server's failure (5xx) marks the span failed.
func endSpan(span trace.Span, status int, code string) {
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if code != "" {
		span.SetAttributes(attribute.String("error.type", code))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, code)
	}
}
