package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/store"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The sandbox front (E2B_SANDBOX_URL): one listener for every sandbox and
// port, as E2B's proxy (infra packages/shared/pkg/proxy/host.go). A request
// names its sandbox and port by the E2b-Sandbox-Id and E2b-Sandbox-Port
// headers the SDKs always send, or by a Host of <port>-<id>.<domain>
// (getHost's, for a script's fetch).
//
// Who may: one decision, default-deny, on the request's path as it is
// spelled canonically (checkCanonicalPath: absolute, clean, no escapes; any
// other spelling of a path of envd's or the code interpreter's is
// refused, so that the check and the handler can never read two routes
// from one request). envd's calls (port 49983) and the code
// interpreter's (port 49999) need the sandbox's access token
// (X-Access-Token, which create and connect answered), but for the routes
// E2B itself leaves open, listed in openRoute: envd's GET /health, and the
// interpreter's /health and /contexts calls (which the SDK sends without
// it); envd's /files takes a signature of the token instead (the SDK's
// uploadUrl and downloadUrl). Every port but envd's, the open routes
// included, answers only a caller who may reach the sandbox (mayReach):
// anyone, as E2B's do, for a sandbox made through E2B's API with public
// traffic (its default); one made with allowPublicTraffic false, or
// through Hutch's own API, asks for its traffic token
// (E2B-Traffic-Access-Token) or its access token. envd's /health answers
// the same caller only, and anyone else as for a sandbox that does not
// exist. The front listens on loopback unless told otherwise.
//
// A token is taken only while the key it was given to lives (keys.go);
// the calls of envd and the interpreter are limited per key and those
// that act are recorded in the audit log (guard.go).

// Headers of E2B's: names, not credentials.
//
// #nosec G101 -- header names
const (
	headerSandboxID    = "E2b-Sandbox-Id"
	headerSandboxPort  = "E2b-Sandbox-Port"
	headerAccessToken  = "X-Access-Token"
	headerTrafficToken = "E2b-Traffic-Access-Token"
)

// CodeInterpreter serves E2B's code interpreter API (port 49999) for
// sandbox id; the front has checked that r may.
type CodeInterpreter interface {
	ServeSandbox(w http.ResponseWriter, r *http.Request, id string)
}

// FrontConfig configures a Front.
type FrontConfig struct {
	Manager  *core.Manager
	Previews *preview.Proxy
	// Interpreter serves the code interpreter's port; nil: none.
	Interpreter CodeInterpreter
	// Redactor holds the secret values no answer may carry.
	Redactor *redact.Redactor
	// DaemonKey is the daemon's key: sandboxes' tokens derive from it.
	DaemonKey string
	// Keys are the API keys the tokens are bound to (keys.go), as the
	// control plane's; nil: tokens are bound to no key.
	Keys Keys
	// Audit records the calls that act (guard.go); nil: none.
	Audit AuditLog
	// Rate is how many calls a second each key (or, for calls that carry
	// no token, each sandbox) may make of envd and the code interpreter on
	// average, and Burst how many at once above that (guard.go); Rate 0:
	// no limit.
	Rate  float64
	Burst int
	// Domain is that of the <port>-<id>.<Domain> hosts the front routes
	// ("localhost:49983": a port in it is ignored).
	Domain string
	Logger *slog.Logger
}

// Front is the sandbox front.
type Front struct {
	cfg     FrontConfig
	keyring *keyring
	limiter *limiter
	log     *slog.Logger
	envd    *http.ServeMux
}

// frontTracer starts the front's spans.
var frontTracer = otel.Tracer("github.com/hutchdev/hutch/internal/front/e2b")

// portName names a port of the front's in a span's name: envd, the
// interpreter, or a sandbox's own port ("port").
func portName(port int) string {
	switch port {
	case EnvdPort:
		return "envd"
	case InterpreterPort:
		return "interpreter"
	}
	return "port"
}

// NewFront returns the sandbox front.
func NewFront(cfg FrontConfig) *Front {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Front{cfg: cfg, keyring: newKeyring(cfg.Keys, newTokens(cfg.DaemonKey)), limiter: newLimiter(cfg.Rate, cfg.Burst), log: log, envd: http.NewServeMux()}
	services := (&agentclient.EnvdFront{Target: f.target, Redactor: f.streamRedactor()}).Handler()
	f.envd.Handle("/", services)
	f.envd.HandleFunc("/files", f.serveFiles)
	return f
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, ok := f.route(r)
	// A span per call (OpenTelemetry, when the daemon turned it on),
	// continuing the SDK's trace: envd's, the interpreter's, a port's.
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := frontTracer.Start(ctx, "E2B "+r.Method+" "+portName(port), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), spans.Sandbox.String(id), attribute.Int("hutch.port", port)))
	defer span.End()
	r = r.WithContext(ctx)
	if port == EnvdPort || port == InterpreterPort || !ok {
		if err := checkCanonicalPath(r); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if !ok {
		// The search costs a hash per key of every sandbox: the caller's
		// address pays for it.
		if !f.limiter.allow(w, "address "+remoteHost(r)) {
			return
		}
		if id, ok = f.signedSandbox(r); !ok {
			writeError(w, http.StatusBadRequest, "name the sandbox: the E2b-Sandbox-Id and E2b-Sandbox-Port headers, or a host <port>-<sandbox>."+f.cfg.Domain)
			return
		}
		port = EnvdPort
	}
	sb, err := f.cfg.Manager.Get(r.Context(), id)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			// Limited as a call without a token of a sandbox that is (see
			// caller.bucket): a 429 tells nothing of which ids are.
			if (port == EnvdPort || port == InterpreterPort) && !f.limiter.allow(w, "sandbox "+id) {
				return
			}
			writeNotFound(w, id)
			return
		}
		writeEnvdError(w, http.StatusInternalServerError, err)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), sandboxKey{}, id))
	c, err := f.callerOf(r, sb)
	if err != nil {
		f.log.Error("e2b front: the live keys", "error", err)
		writeError(w, http.StatusServiceUnavailable, "the daemon cannot tell which keys live now: try again")
		return
	}
	if port == EnvdPort || port == InterpreterPort {
		f.serveCall(w, r, sb, port, c)
		return
	}
	if !f.mayReach(sb, c) {
		writeError(w, http.StatusUnauthorized, "sandbox "+id+" takes traffic with its traffic access token only")
		return
	}
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "e2b-") || strings.EqualFold(k, headerAccessToken) {
			r.Header.Del(k)
		}
	}
	if err := f.cfg.Previews.Serve(w, r, preview.Target{Sandbox: id, Port: port}); err != nil && r.Context().Err() == nil {
		writeEnvdError(w, statusOf(err), err)
	}
}

// serveCall serves a call of envd's (port EnvdPort) or the code
// interpreter's on sb from c: recorded, limited, then checked.
func (f *Front) serveCall(w http.ResponseWriter, r *http.Request, sb *store.Sandbox, port int, c caller) {
	w, done := f.auditing(w, r, sb, port, c)
	defer done()
	if !f.limiter.allow(w, c.bucket(sb)) {
		return
	}
	if port == EnvdPort {
		f.serveEnvd(w, r, sb, c)
		return
	}
	if !f.mayCall(r, sb, InterpreterPort, c) {
		writeError(w, http.StatusUnauthorized, "sandbox "+sb.ID+": a wrong or missing access token")
		return
	}
	if f.cfg.Interpreter == nil {
		writeError(w, http.StatusNotImplemented, "this daemon serves no code interpreter")
		return
	}
	f.cfg.Interpreter.ServeSandbox(w, r, sb.ID)
}

// writeNotFound answers as E2B's proxy does for a sandbox it does not
// know: also for one the caller may not learn of.
func writeNotFound(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusBadGateway, map[string]any{"message": "The sandbox was not found", "sandboxId": id, "code": http.StatusBadGateway})
}

// checkCanonicalPath refuses r unless its path is spelled as the one name
// of one route: absolute, clean (no empty, "." or ".." segment, no "/" at
// the end), without escapes (an escaped "/" ends a segment for one reader
// and not for another) or backslashes. The SDKs send no other. What is
// let through, r.URL.Path, is then the route both the check and the
// handler read.
func checkCanonicalPath(r *http.Request) error {
	p := r.URL.Path
	if r.URL.RawPath != "" || r.URL.Opaque != "" || !strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsAny(p, "\\%\x00") {
		return fmt.Errorf("the path %q is not spelled as the sandbox's API spells it: no empty, '.' or '..' segment, no '/' at its end, no escapes", r.URL.EscapedPath())
	}
	return nil
}

// openRoute says whether a call of method on path of port is one that
// E2B leaves open: it needs no access token, only that its caller may
// reach the sandbox (envd's /files, which takes a signature instead, is
// serveEnvd's to decide). Every other call needs the token. path is
// canonical (checkCanonicalPath).
func openRoute(port int, method, path string) bool {
	switch port {
	case EnvdPort:
		return method == http.MethodGet && path == "/health"
	case InterpreterPort:
		rt, ok := codeRouteOf(path)
		return ok && rt.open(method)
	}
	return false
}

// mayCall says whether r, from c, may make its call of port (envd's or
// the code interpreter's) on sb: with sb's access token, or an open
// route's call by a caller who may reach sb.
func (f *Front) mayCall(r *http.Request, sb *store.Sandbox, port int, c caller) bool {
	return c.access != nil || openRoute(port, r.Method, r.URL.Path) && f.mayReach(sb, c)
}

// caller is who a front request is from, by the tokens it carries: each
// the holder of the live key whose token it is (keys.go), nil for none.
type caller struct {
	access  *holder // X-Access-Token
	traffic *holder // E2b-Traffic-Access-Token
	signed  *holder // the token a /files URL's signature is of
}

// callerOf finds whose tokens r carries, among the keys that may reach
// sb now.
func (f *Front) callerOf(r *http.Request, sb *store.Sandbox) (caller, error) {
	var c caller
	access, traffic := r.Header.Get(headerAccessToken), r.Header.Get(headerTrafficToken)
	signature := r.URL.Path == "/files" && r.URL.Query().Get("signature") != ""
	if access == "" && traffic == "" && !signature {
		return c, nil
	}
	cands, err := f.keyring.candidates(r.Context(), sb.ID, sb.Workspace)
	if err != nil {
		return c, err
	}
	if h, ok := cands.holderOf(cands.envd, access); ok {
		c.access = &h
	}
	if h, ok := cands.holderOf(cands.traffic, traffic); ok {
		c.traffic = &h
	}
	if signature && c.access == nil {
		if h, ok := signedBy(r, cands); ok {
			c.signed = &h
		}
	}
	return c, nil
}

// key is the holder the call acts as: the one of its access token, else
// of its signature, else of its traffic token; nil when it carries none.
func (c caller) key() *holder {
	switch {
	case c.access != nil:
		return c.access
	case c.signed != nil:
		return c.signed
	}
	return c.traffic
}

// route finds the sandbox and port a request is for: by E2B's headers, or
// by its Host.
func (f *Front) route(r *http.Request) (id string, port int, ok bool) {
	if id := r.Header.Get(headerSandboxID); id != "" {
		port, err := strconv.Atoi(r.Header.Get(headerSandboxPort))
		if err != nil {
			port = EnvdPort
		}
		return id, port, port > 0 && port <= 65535
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	domain := f.cfg.Domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		domain = h
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(domain))
	if !ok || domain == "" || strings.Contains(label, ".") {
		return "", 0, false
	}
	portText, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portText)
	if !ok || err != nil || port < 1 || port > 65535 || id == "" {
		return "", 0, false
	}
	return id, port, true
}

// mayReach reports whether c may reach sb's ports: its traffic is
// public, or c carries its traffic or access token.
func (f *Front) mayReach(sb *store.Sandbox, c caller) bool {
	if sb.Metadata[metaTemplate] != "" && sb.Metadata[metaPrivate] != "true" {
		return true
	}
	return c.traffic != nil || c.access != nil
}

// serveEnvd serves envd's API: /health to a caller who may reach sb
// (anyone else is answered as for a sandbox that does not exist), /files
// with the token or a signature, the rest with the token.
func (f *Front) serveEnvd(w http.ResponseWriter, r *http.Request, sb *store.Sandbox, c caller) {
	if r.URL.Path == "/health" && r.Method == http.MethodGet {
		if !f.mayCall(r, sb, EnvdPort, c) {
			writeNotFound(w, sb.ID)
			return
		}
		if sb.State != "running" {
			writeJSON(w, http.StatusBadGateway, map[string]any{"message": "The sandbox is not running", "sandboxId": sb.ID, "code": http.StatusBadGateway})
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !f.mayCall(r, sb, EnvdPort, c) && c.signed == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"unauthenticated","message":"a wrong or missing X-Access-Token for sandbox ` + sb.ID + `"}`))
		return
	}
	f.envd.ServeHTTP(w, r)
}

// signedBy finds the holder of the sandbox's candidate envd token that a
// /files request's signature is of, as envd checks it: "v1_" and the
// unpadded base64 of the SHA-256 of path:operation:username:token[:expiry];
// false for none, or an expired signature.
func signedBy(r *http.Request, cands *candidates) (holder, bool) {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return holder{}, false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	head, tail := q.Get("path")+":"+op+":"+q.Get("username")+":", ""
	if exp := q.Get("signature_expiration"); exp != "" {
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > at {
			return holder{}, false
		}
		tail = ":" + exp
	}
	for i, token := range cands.envd {
		sum := sha256.Sum256([]byte(head + token + tail))
		want := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
		if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1 {
			return cands.holders[i], true
		}
	}
	return holder{}, false
}

// signedSandbox finds the sandbox of a signed /files URL that names none:
// the SDK's uploadUrl and downloadUrl carry no sandbox id when
// E2B_SANDBOX_URL is set, but the signature is of one sandbox's token.
// A URL that names its sandbox (headers or host) is checked against that
// sandbox only; this search is for the SDK's URLs alone, so it is bounded
// to what they can be: a well-formed, unexpired signature, checked
// against the sandboxes made through E2B's API (the SDK's), each once
// per key that may reach it, at the rate of the caller's address.
func (f *Front) signedSandbox(r *http.Request) (string, bool) {
	q := r.URL.Query()
	if r.URL.Path != "/files" || !wellFormedSignature(q.Get("signature")) || len(q["signature"]) != 1 {
		return "", false
	}
	if exp := q.Get("signature_expiration"); exp != "" {
		if at, err := strconv.ParseInt(exp, 10, 64); err != nil || time.Now().Unix() > at {
			return "", false
		}
	}
	all, err := f.cfg.Manager.List(r.Context())
	if err != nil {
		return "", false
	}
	for _, sb := range all {
		if sb.Metadata[metaTemplate] == "" {
			continue
		}
		cands, err := f.keyring.candidates(r.Context(), sb.ID, sb.Workspace)
		if err != nil {
			return "", false
		}
		if _, ok := signedBy(r, cands); ok {
			return sb.ID, true
		}
	}
	return "", false
}

// wellFormedSignature says whether sig has the shape of envd's signature:
// "v1_" and the unpadded base64 of a SHA-256.
func wellFormedSignature(sig string) bool {
	b64, ok := strings.CutPrefix(sig, "v1_")
	if !ok {
		return false
	}
	sum, err := base64.RawStdEncoding.DecodeString(b64)
	return err == nil && len(sum) == sha256.Size
}

// statusOf is the HTTP status of a Hutch error kind.
func statusOf(err error) int {
	switch errdefs.Kind(err) {
	case errdefs.ErrNotFound:
		return http.StatusNotFound
	case errdefs.ErrInvalidArgument:
		return http.StatusBadRequest
	case errdefs.ErrFailedPrecondition, errdefs.ErrConflict:
		return http.StatusConflict
	}
	return http.StatusBadGateway
}
