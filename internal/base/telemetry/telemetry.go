// Package telemetry turns on OpenTelemetry tracing when the standard
// OTEL_* variables ask for it, and off it stays otherwise: with no
// exporter endpoint set, every span is the API's no-op, a few nanoseconds.
//
// What is read, as the specification names it: OTEL_SDK_DISABLED,
// OTEL_TRACES_EXPORTER (otlp, the default, or none), OTEL_EXPORTER_OTLP_
// ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (one is needed), the
// protocol (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL: http/protobuf, the
// default, or grpc), and what the exporters and the SDK read themselves:
// headers, timeouts, TLS, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER, OTEL_BSP_*. A caller's W3C traceparent continues
// its trace (the propagator is trace context and baggage).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Setup starts tracing if the environment asks for it, for service (the
// default service.name) at version. enabled says whether it did;
// shutdown sends what is buffered and stops it (a no-op when off).
func Setup(ctx context.Context, service, version string) (enabled bool, shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false, off, nil
	}
	switch exp := os.Getenv("OTEL_TRACES_EXPORTER"); exp {
	case "", "otlp":
	case "none":
		return false, off, nil
	default:
		return false, off, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: only otlp (or none) is supported", exp)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false, off, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return false, off, fmt.Errorf("OTLP protocol %q: give http/protobuf or grpc", protocol)
	}
	if err != nil {
		return false, off, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(service), semconv.ServiceVersion(version)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return false, off, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return true, tp.Shutdown, nil
}
