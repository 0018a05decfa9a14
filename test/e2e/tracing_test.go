package e2e

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hutchdev/hutch/client"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps every span it
// is sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []span
}

// span is a received span, its ids in hex.
type span struct {
	name, trace, id, parent string
	service                 string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectorpb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans = append(o.spans, span{name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), service: service})
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// of returns the spans of trace id.
func (o *otlpReceiver) of(id string) []span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []span
	for _, s := range o.spans {
		if s.trace == id {
			out = append(out, s)
		}
	}
	return out
}

// TestTracing points a daemon's OTLP exporter at a test receiver with the
// standard variables: a create sent with a traceparent is one trace, the
// caller's, with the API's span as the child of the caller's and the
// create's steps below it.
func TestTracing(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	d := newDaemon(t)
	d.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=hutch-under-test"}
	d.start()

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+d.addr+"/v1/sandboxes", strings.NewReader(`{"runtime":"runc"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var sb client.Sandbox
	if res.StatusCode != http.StatusCreated || json.Unmarshal(body, &sb) != nil {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}
	d.sandboxIDs = append(d.sandboxIDs, sb.ID)
	if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
		t.Fatal(err)
	}

	// Each span below its parent, by name: the create's steps.
	want := map[string]string{
		"POST /v1/sandboxes": "the caller's",
		"sandbox.create":     "POST /v1/sandboxes",
		"prepare":            "sandbox.create",
		"runtime.create":     "sandbox.create",
		"disk and root":      "runtime.create",
		"network":            "runtime.create",
		"runtime.start":      "runtime.create",
		"hook.start network": "sandbox.create",
	}
	var got []span
	// Every one of them: the exporter sends spans in batches as they end,
	// and the create's own ends after its steps, in the next batch maybe.
	waitFor(t, 30*time.Second, "the create's spans at the receiver", func() bool {
		got = recv.of(traceID)
		names := map[string]bool{}
		for _, s := range got {
			names[s.name] = true
		}
		for name := range want {
			if !names[name] {
				return false
			}
		}
		return true
	})
	byName := map[string]span{}
	for _, s := range got {
		byName[s.name] = s
		if s.service != "hutch-under-test" {
			t.Errorf("span %s: service.name %q, want OTEL_SERVICE_NAME's", s.name, s.service)
		}
	}
	for name, parent := range want {
		s, ok := byName[name]
		parentID := callerSpan
		if parent != "the caller's" {
			parentID = byName[parent].id
		}
		if !ok || s.parent != parentID {
			t.Errorf("span %q: %+v, want a child of %s (%s); the trace has %+v", name, s, parent, parentID, got)
		}
	}
}
