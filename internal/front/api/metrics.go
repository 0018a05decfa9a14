package api

import (
	"net/http"

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
