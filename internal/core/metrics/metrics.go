// Package metrics is the daemon's Prometheus metrics (GET /metrics): how
// long the lifecycle's steps take (Steps, a hook of the kernel), what
// the API answers, and, read at each scrape, the sandboxes by state, the
// warm pools, the workspaces' quotas and use, the sandboxes' egress, and
// the daemon's own Go runtime.
//
// Labels are bounded sets: states, runtimes, routes, error codes,
// workspaces and templates (which the administrator makes), never a
// sandbox's id; what one sandbox does over time is its own series
// (internal/core/samples, GET /v1/sandboxes/{id}/metrics).
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hutchdev/hutch/internal/core/hook"
)

// namespace leads every metric's name.
const namespace = "hutch"

// stepBuckets are the bounds of the steps' and the API's latency
// histograms, in seconds: a warm create takes milliseconds, a gVisor
// resume with memory a second or more.
var stepBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// buildBuckets are those of template builds: seconds to most of an hour.
var buildBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// stepNames are the steps timed (exec: a command's run, from the exec
// service), each its own histogram
// (hutch_sandbox_create_seconds, …); build is a template's,
// hutch_template_build_seconds.
var stepNames = []string{"create", "exec", "resume", "suspend", "stop", "pause", "delete", "fork"}

// Steps times the lifecycle's steps (hook.Observer): a histogram per
// step by runtime and outcome, and the warm pools' hits and misses.
type Steps struct {
	steps  map[string]*prometheus.HistogramVec
	builds *prometheus.HistogramVec
	pool   *prometheus.CounterVec
}

// NewSteps returns Steps, registered nowhere yet (see New).
func NewSteps() *Steps {
	s := &Steps{steps: map[string]*prometheus.HistogramVec{}}
	for _, name := range stepNames {
		s.steps[name] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "sandbox", Name: name + "_seconds",
			Help:    "How long sandboxes' " + name + " steps took, by runtime and outcome (ok, error).",
			Buckets: stepBuckets,
		}, []string{"runtime", "outcome"})
	}
	s.builds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "template", Name: "build_seconds",
		Help: "How long template builds took, by outcome (ok, error).", Buckets: buildBuckets,
	}, []string{"outcome"})
	s.pool = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "warm_pool", Name: "claims_total",
		Help: "Creates a warm pool served (outcome hit) or had no sandbox ready for (miss), by runtime.",
	}, []string{"runtime", "outcome"})
	return s
}

// Name names the hook.
func (s *Steps) Name() string { return "metrics" }

// Observed counts a step that ended (hook.Observer).
func (s *Steps) Observed(st hook.Step) {
	outcome := "ok"
	if st.Err != nil {
		outcome = "error"
	}
	if st.Name == "build" {
		s.builds.WithLabelValues(outcome).Observe(st.Took.Seconds())
		return
	}
	if h := s.steps[st.Name]; h != nil {
		h.WithLabelValues(st.Runtime, outcome).Observe(st.Took.Seconds())
	}
	if st.Pool != "" {
		s.pool.WithLabelValues(st.Runtime, st.Pool).Inc()
	}
}

func (s *Steps) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{s.builds, s.pool}
	for _, name := range stepNames {
		cs = append(cs, s.steps[name])
	}
	return cs
}

// Metrics is the daemon's registry of metrics, and what the API records
// in it.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

// Config is what the metrics read.
type Config struct {
	// Steps are the steps' timings, a hook of the kernel.
	Steps *Steps
	// State is what is read at each scrape (a nil func: not read).
	State State
	// Version is the daemon's (hutch_build_info).
	Version string
}

// New returns the daemon's metrics: cfg's, the API's, and the Go
// runtime's and the process's own.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "api", Name: "requests_total",
		Help: "API requests answered, by method, route (its pattern) and HTTP status code.",
	}, []string{"method", "route", "code"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "api", Name: "errors_total",
		Help: "API requests answered with an error, by method, route and the error's code (not_found, resource_exhausted, …).",
	}, []string{"method", "route", "error"})
	m.seconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "api", Name: "request_duration_seconds",
		Help:    "How long API requests took to answer, by method and route (streams: until they ended).",
		Buckets: stepBuckets,
	}, []string{"method", "route"})
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info", Help: "The daemon's version, as a label; always 1.",
		ConstLabels: prometheus.Labels{"version": cfg.Version},
	})
	info.Set(1)
	m.reg.MustRegister(m.requests, m.errors, m.seconds, info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Steps != nil {
		m.reg.MustRegister(cfg.Steps.collectors()...)
	}
	m.reg.MustRegister(newStateCollector(cfg.State))
	return m
}

// Handler serves the metrics in Prometheus's text format (or
// OpenMetrics, when asked).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// Request records an API request to route (a pattern: "GET
// /v1/sandboxes/{id}") answered with status and, for an error, its code,
// after took.
func (m *Metrics) Request(route string, status int, code string, took time.Duration) {
	method, path := splitRoute(route)
	m.requests.WithLabelValues(method, path, strconv.Itoa(status)).Inc()
	m.seconds.WithLabelValues(method, path).Observe(took.Seconds())
	if status >= 400 {
		m.errors.WithLabelValues(method, path, code).Inc()
	}
}

// splitRoute splits a ServeMux pattern into its method ("*" for any)
// and path.
func splitRoute(route string) (method, path string) {
	if method, path, ok := strings.Cut(route, " "); ok {
		return method, path
	}
	return "*", route
}
