// Package api serves Hutch's REST API v1 (api/openapi.yaml): routes, bearer
// authentication, JSON and SSE, and the one mapping from errors to statuses.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	hutchapi "github.com/hutchdev/hutch/api"
	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/console"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/logring"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/metrics"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// Config wires a Server.
type Config struct {
	// Manager is the lifecycle core; the services beside it are what
	// the routes of their names reach.
	Manager   *core.Manager
	Exec      Execs
	Files     Files
	Tools     Tools
	Templates Templates
	// Checkpoints keeps the sandboxes' checkpoints.
	Checkpoints Checkpoints
	// Desktops drives the sandboxes' desktops; nil: none.
	Desktops Desktops
	Volumes  Volumes
	// Keys are the API keys besides APIKey.
	Keys *apikeys.Service
	// Audit is the audit log; nil: calls are not recorded.
	Audit AuditLog
	// Workspaces keeps the workspaces' quotas and usage.
	Workspaces Workspaces
	// Networks is the sandboxes' network plane.
	Networks Networks
	// Secrets keeps the workspaces' secrets.
	Secrets Secrets
	// Redactor holds every secret value the daemon knows of: none of
	// them leaves in an answer (see redaction.go). Nil redacts nothing.
	Redactor *redact.Redactor
	// Previews passes preview requests on to sandboxes (see preview.go);
	// nil: no previews. PreviewAccess lets some through without a key;
	// nil: preview links (signed by PreviewLinks, none when nil) and
	// public services do (previewlink.go).
	Previews      Previews
	PreviewAccess PreviewAccess
	PreviewLinks  *download.Signer
	// Screenshots takes screenshots of services' pages; nil: none.
	Screenshots Screenshots
	// E2B is where E2B's SDKs reach the daemon (GET /v1/e2b).
	E2B client.E2BInfo
	// PublicURL is how callers reach the daemon: previews' URLs start
	// with it.
	PublicURL string
	// Limits bound what each key may ask (see limits.go).
	Limits Limits
	// APIKey is the bearer token TCP clients must present.
	APIKey  string
	Version string
	Logger  *slog.Logger
	// DataDir and RecentLog are what the health route tells the
	// administrator of besides (see health.go): the space left on the
	// data dir's filesystem ("": not told), and the daemon's latest
	// warnings and errors (nil: none kept).
	DataDir   string
	RecentLog *logring.Ring
	// Defaults are what the daemon gives a sandbox or a tool call that
	// names no mode (GET /v1/whoami tells them).
	Defaults client.Defaults
	// Metrics are the daemon's Prometheus metrics (GET /metrics), which
	// record every request; nil: none.
	Metrics *metrics.Metrics
	// Samples are what each sandbox used over time; nil: none are kept.
	Samples Samples
	// Events are the sandboxes' lifecycle events, and Webhooks the URLs
	// they are posted to; nil: none.
	Events   Events
	Webhooks Webhooks
	// Nodes are the cluster's members (GET /v1/nodes); nil: none told.
	Nodes Nodes
}

// Server is the REST API's handlers.
type Server struct {
	m         *core.Manager
	execs     Execs
	files     Files
	tools     Tools
	templates Templates
	volumes   Volumes
	keys      *apikeys.Service
	audit     AuditLog
	spaces    Workspaces
	nets      Networks
	secrets   Secrets
	redactor  *redact.Redactor
	previews  Previews
	access    PreviewAccess
	links     *download.Signer
	shots     Screenshots
	limiter   *limiter
	e2b       client.E2BInfo
	publicURL string
	key       string
	version   string
	log       *slog.Logger
	dataDir   string
	recent    *logring.Ring
	defaults  client.Defaults
	metrics   *metrics.Metrics
	samples   Samples
	events    Events
	webhooks  Webhooks
	nodes     Nodes
	checkpts  Checkpoints
	desktops  Desktops
}

// New returns a Server.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{m: cfg.Manager, execs: cfg.Exec, files: cfg.Files, tools: cfg.Tools, templates: cfg.Templates, volumes: cfg.Volumes, keys: cfg.Keys, audit: cfg.Audit, spaces: cfg.Workspaces, nets: cfg.Networks, secrets: cfg.Secrets, redactor: cfg.Redactor, previews: cfg.Previews, access: cfg.PreviewAccess, links: cfg.PreviewLinks, shots: cfg.Screenshots, limiter: newLimiter(cfg.Limits), e2b: cfg.E2B, publicURL: cfg.PublicURL, key: cfg.APIKey, version: cfg.Version, log: log}
	s.dataDir, s.recent, s.defaults, s.metrics, s.samples = cfg.DataDir, cfg.RecentLog, cfg.Defaults, cfg.Metrics, cfg.Samples
	s.events, s.webhooks = cfg.Events, cfg.Webhooks
	s.nodes, s.checkpts, s.desktops = cfg.Nodes, cfg.Checkpoints, cfg.Desktops
	if s.access == nil {
		s.access = s.previewAccess
	}
	return s
}

// mcpPath is where the MCP server answers (streamable HTTP).
const mcpPath = "/mcp"

// route is one endpoint: a ServeMux pattern ("METHOD /path") and its
// handler. api/openapi.yaml describes each (see TestRoutesMatchOpenAPI).
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes are the REST API's endpoints.
func (s *Server) routes() []route {
	return []route{
		{"GET /v1/health", s.health},
		{"GET /v1/nodes", s.listNodes},
		{"GET /v1/whoami", s.whoami},
		{"GET /v1/e2b", s.e2bInfo},
		{"GET /v1/openapi.yaml", s.openapi},
		{metricsRoute, s.serveMetrics},
		{"POST /v1/sandboxes", s.createSandbox},
		{"GET /v1/sandboxes", s.listSandboxes},
		{"GET /v1/sandboxes/{id}", s.getSandbox},
		{"DELETE /v1/sandboxes/{id}", s.deleteSandbox},
		{"PATCH /v1/sandboxes/{id}", s.updateSandbox},
		{"GET /v1/sandboxes/{id}/stats", s.sandboxStats},
		{"GET /v1/sandboxes/{id}/metrics", s.sandboxMetrics},
		{"GET /v1/sandboxes/{id}/network/events", s.networkEvents},
		{"GET /v1/sandboxes/{id}/network/log", s.networkLog},
		{"GET /v1/sandboxes/{id}/network/proposal", s.networkProposal},
		{"POST /v1/sandboxes/{id}/pause", s.pauseSandbox},
		{"POST /v1/sandboxes/{id}/unpause", s.unpauseSandbox},
		{"POST /v1/sandboxes/{id}/suspend", s.suspendSandbox},
		{"POST /v1/sandboxes/{id}/resume", s.resumeSandbox},
		{"POST /v1/sandboxes/{id}/stop", s.stopSandbox},
		{"POST /v1/sandboxes/{id}/start", s.resumeSandbox},
		{"GET /v1/sandboxes/{id}/activity", s.sandboxActivity},
		{"POST /v1/sandboxes/{id}/snapshot", s.snapshotSandbox},
		{"POST /v1/sandboxes/{id}/fork", s.forkSandbox},
		{"POST /v1/sandboxes/{id}/checkpoints", s.createCheckpoint},
		{"GET /v1/sandboxes/{id}/checkpoints", s.listCheckpoints},
		{"GET /v1/sandboxes/{id}/checkpoints/{checkpoint}/diff", s.diffCheckpoint},
		{"POST /v1/sandboxes/{id}/checkpoints/{checkpoint}/rollback", s.rollbackCheckpoint},
		{"DELETE /v1/sandboxes/{id}/checkpoints/{checkpoint}", s.deleteCheckpoint},
		{"POST /v1/sandboxes/{id}/desktop", s.withDesktops(s.startDesktop)},
		{"GET /v1/sandboxes/{id}/desktop", s.withDesktops(s.getDesktop)},
		{"DELETE /v1/sandboxes/{id}/desktop", s.withDesktops(s.stopDesktop)},
		{"GET /v1/sandboxes/{id}/desktop/screenshot", s.withDesktops(s.desktopScreenshot)},
		{"POST /v1/sandboxes/{id}/desktop/actions", s.withDesktops(s.desktopActions)},
		{"POST /v1/sandboxes/{id}/desktop/stream", s.withDesktops(s.desktopStream)},
		{"POST /v1/sandboxes/{id}/processes", s.startProcess},
		{"GET /v1/sandboxes/{id}/processes", s.listProcesses},
		{"GET /v1/sandboxes/{id}/processes/{name}/logs", s.processLogs},
		{"POST /v1/sandboxes/{id}/processes/{name}/signal", s.signalProcess},
		{"POST /v1/sandboxes/{id}/processes/{name}/stdin", s.processInput},
		{"POST /v1/sandboxes/{id}/processes/{name}/restart", s.restartProcess},
		{"DELETE /v1/sandboxes/{id}/processes/{name}", s.deleteProcess},
		{"POST /v1/sandboxes/{id}/exec", s.exec},
		{"GET /v1/sandboxes/{id}/pty", s.pty},
		{"POST /v1/sandboxes/{id}/code", s.runCode},
		{"POST /v1/sandboxes/{id}/services", s.startService},
		{"GET /v1/sandboxes/{id}/services", s.listServices},
		{"GET /v1/sandboxes/{id}/services/{name}", s.getService},
		{"GET /v1/sandboxes/{id}/services/{name}/logs", s.processLogs},
		{"GET /v1/sandboxes/{id}/services/{name}/events", s.serviceEvents},
		{"POST /v1/sandboxes/{id}/services/{name}/restart", s.restartService},
		{"POST /v1/sandboxes/{id}/services/{name}/stop", s.stopService},
		{"DELETE /v1/sandboxes/{id}/services/{name}", s.deleteService},
		{"POST /v1/sandboxes/{id}/services/{name}/link", s.serviceLink},
		{"DELETE /v1/sandboxes/{id}/services/{name}/link", s.revokeServiceLinks},
		{"POST /v1/sandboxes/{id}/services/{name}/screenshot", s.serviceScreenshot},
		{"POST /v1/sandboxes/{id}/contexts", s.createContext},
		{"GET /v1/sandboxes/{id}/contexts", s.listContexts},
		{"POST /v1/sandboxes/{id}/contexts/{context}/restart", s.restartContext},
		{"DELETE /v1/sandboxes/{id}/contexts/{context}", s.deleteContext},
		{"GET /v1/sandboxes/{id}/files", s.readFile},
		{"PUT /v1/sandboxes/{id}/files", s.writeFile},
		{"DELETE /v1/sandboxes/{id}/files", s.removeFile},
		{"GET /v1/sandboxes/{id}/files/stat", s.statFile},
		{"GET /v1/sandboxes/{id}/files/list", s.listFiles},
		{"GET /v1/sandboxes/{id}/files/watch", s.watchFiles},
		{"POST /v1/sandboxes/{id}/files/mkdir", s.makeDir},
		{"POST /v1/sandboxes/{id}/files/move", s.moveFile},
		{"POST /v1/sandboxes/{id}/files/upload", s.uploadFiles},
		{"GET /v1/tools", s.listTools},
		{"POST /v1/keys", s.createAPIKey},
		{"GET /v1/keys", s.listAPIKeys},
		{"DELETE /v1/keys/{name}", s.deleteAPIKey},
		{"GET /v1/audit", s.listAudit},
		{"GET /v1/events", s.listEvents},
		{"POST /v1/webhooks", s.createWebhook},
		{"GET /v1/webhooks", s.listWebhooks},
		{"DELETE /v1/webhooks/{webhook}", s.deleteWebhook},
		{"GET /v1/webhooks/{webhook}/deliveries", s.webhookDeliveries},
		{"POST /v1/secrets", s.setSecret},
		{"GET /v1/secrets", s.listSecrets},
		{"DELETE /v1/secrets/{name}", s.deleteSecret},
		{"POST /v1/secrets/rotate-master", s.rotateMaster},
		{"GET /v1/workspaces", s.listWorkspaces},
		{"GET /v1/workspaces/{w}/usage", s.workspaceUsage},
		{"PUT /v1/workspaces/{w}/quota", s.setQuota},
		{"POST /v1/sandboxes/{id}/tools/{name}", s.runTool},
		{"GET /v1/downloads/{token}", s.download},
		{"POST /v1/volumes", s.createVolume},
		{"GET /v1/volumes", s.listVolumes},
		{"DELETE /v1/volumes/{name}", s.deleteVolume},
		{"GET /v1/templates", s.listTemplates},
		{"POST /v1/templates", s.buildTemplate},
		{"GET /v1/templates/{name}", s.getTemplate},
		{"DELETE /v1/templates/{name}", s.deleteTemplate},
		{"POST /v1/templates/{name}/import", s.importTemplate},
		{"GET /v1/templates/{name}/archive", s.templateArchive},
	}
}

// Handler returns the API. With requireKey every request must carry an API
// key (TCP); without, the caller is the administrator (the root-only unix
// socket).
func (s *Server) Handler(requireKey bool) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.pattern, s.guard(rt, requireKey))
	}
	if h, err := s.mcpHandler(); err != nil {
		s.log.Error("MCP at /mcp is off", "error", err)
	} else {
		// Every method of the protocol's: audited and redacted as a route.
		mux.Handle(mcpPath, s.guard(route{pattern: "* " + mcpPath, handler: h.ServeHTTP}, requireKey))
	}
	// Every method, not audited (see preview.go).
	mux.HandleFunc(previewPattern, s.previewByPath(requireKey))
	// The web console's page and files, which need no key (callerFor).
	domain := ""
	if s.previews != nil {
		domain = s.previews.Domain()
	}
	con := console.Handler(domain)
	mux.Handle("GET /{$}", con)
	mux.Handle("GET /assets/", con)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, errdefs.NotFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return CanonicalPaths(s.identify(s.previewHosts(mux, requireKey), requireKey))
}

// e2bInfo says where E2B's SDKs reach the daemon (internal/front/e2b).
func (s *Server) e2bInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.e2b)
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(hutchapi.OpenAPI)
}

// maxJSONBody bounds request bodies that are JSON, unless their route
// says more (see maxBodyOf).
const maxJSONBody = 8 << 20

// MaxCreateBody bounds a create's body, which may carry files_tar: 32 MiB
// base64-encoded, and room for the rest; a tool call's arguments too.
const MaxCreateBody = 48 << 20

// maxBodyOf is the bound of a route's request body (see boundedBody).
func maxBodyOf(pattern string) int64 {
	switch pattern {
	case "POST /v1/sandboxes", "POST /v1/sandboxes/{id}/tools/{name}":
		return MaxCreateBody
	case "POST /v1/templates":
		// A Hutchfile's context comes in the body, base64: 4/3 of its
		// 64 MiB.
		return rootfs.MaxContext*4/3 + 1<<20
	case "PUT /v1/sandboxes/{id}/files", "POST /v1/sandboxes/{id}/files/upload":
		return maxFileBody
	case "POST /v1/templates/{name}/import":
		return maxImportBody
	}
	return maxJSONBody
}

// decode reads a JSON request body strictly into v. Its size is bounded
// by its route's (maxBodyOf).
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errdefs.InvalidArgument("the request body is empty; it must be a JSON object")
		}
		if errdefs.Kind(err) != nil {
			return err // too large, or too slow
		}
		return errdefs.InvalidArgument("malformed JSON body: %v", err)
	}
	if dec.More() {
		return errdefs.InvalidArgument("malformed JSON body: more than one JSON value")
	}
	return nil
}

// intParam reads an optional integer query parameter.
// timeParam reads query parameter name as a time: RFC 3339, or Unix
// seconds; zero when it is not given.
func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return time.Time{}, errdefs.InvalidArgument("query parameter %s must be a time (RFC 3339, or Unix seconds), got %q", name, v)
	}
	whole, frac := math.Modf(secs)
	return time.Unix(int64(whole), int64(frac*1e9)).UTC(), nil
}

func intParam(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil {
		return 0, errdefs.InvalidArgument("query parameter %s must be an integer, got %q", name, v)
	}
	return n, nil
}
