package api

import (
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// metricsRoute serves the daemon's Prometheus metrics, on the API's
// listener and on --metrics-listen's (MetricsHandler). They tell every
// workspace's use: the administrator's only.
const metricsRoute = "GET /metrics"

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r, "read the daemon's metrics"); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if s.metrics == nil {
		writeError(w, r, s.log, errdefs.NotImplemented("this daemon keeps no metrics"))
		return
	}
	s.metrics.Handler().ServeHTTP(w, r)
}

// MetricsHandler serves GET /metrics alone, behind the same authorizer
// as the API's (the administrator's key): the daemon's --metrics-listen.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(metricsRoute, s.guard(route{pattern: metricsRoute, handler: s.serveMetrics}, true))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, errdefs.NotFound("no such endpoint: %s %s (this listener serves GET /metrics only)", r.Method, r.URL.Path))
	})
	return CanonicalPaths(s.identify(mux, true))
}

// sandboxMetrics answers GET /v1/sandboxes/{id}/metrics: its samples
// after ?since=.
func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request) {
	since, err := timeParam(r, "since")
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sb, err := s.m.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := client.SandboxMetrics{Samples: []client.MetricsSample{}}
	if s.samples != nil {
		out.IntervalS = s.samples.Interval().Seconds()
		for _, smp := range s.samples.Samples(sb.ID, since) {
			out.Samples = append(out.Samples, client.MetricsSample{
				Time: smp.Time, CPUPercent: smp.CPUPercent, CPUs: smp.CPULimit,
				MemoryBytes: smp.MemoryBytes, MemoryLimitBytes: smp.MemoryLimit,
				DiskUsedBytes: smp.DiskUsedBytes, DiskLimitBytes: sb.DiskMB << 20, Pids: smp.Pids,
				NetworkBytesIn: smp.NetworkInBytes, NetworkBytesOut: smp.NetworkOutBytes,
			})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
