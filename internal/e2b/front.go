package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/preview"
	"github.com/hutchdev/hutch/internal/sandbox"
	"github.com/hutchdev/hutch/internal/secrets/redact"
)

// The sandbox front (E2B_SANDBOX_URL): one listener for every sandbox and
// port, as E2B's proxy (infra packages/shared/pkg/proxy/host.go). A request
// names its sandbox and port by the E2b-Sandbox-Id and E2b-Sandbox-Port
// headers the SDKs always send, or by a Host of <port>-<id>.<domain>
// (getHost's, for a script's fetch).
//
// Who may: envd's calls (port 49983) need the sandbox's access token
// (X-Access-Token, which create and connect answered), but for /health,
// and /files, which takes a signature of it instead (the SDK's uploadUrl
// and downloadUrl). The code interpreter's /execute needs it too; its
// /contexts (which the SDK sends without it) and every other port answer
// anyone, as E2B's do, for a sandbox made through E2B's API with public
// traffic (its default); one made with allowPublicTraffic false, or
// through Hutch's own API, asks for its traffic token
// (E2B-Traffic-Access-Token) or its access token. The front listens on
// loopback unless told otherwise.

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
	Manager  *sandbox.Manager
	Previews *preview.Proxy
	// Interpreter serves the code interpreter's port; nil: none.
	Interpreter CodeInterpreter
	// Redactor holds the secret values no answer may carry.
	Redactor *redact.Redactor
	// DaemonKey is the daemon's key: sandboxes' tokens derive from it.
	DaemonKey string
	// Domain is that of the <port>-<id>.<Domain> hosts the front routes
	// ("localhost:49983": a port in it is ignored).
	Domain string
	Logger *slog.Logger
}

// Front is the sandbox front.
type Front struct {
	cfg    FrontConfig
	tokens tokens
	log    *slog.Logger
	envd   *http.ServeMux
}

// NewFront returns the sandbox front.
func NewFront(cfg FrontConfig) *Front {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Front{cfg: cfg, tokens: newTokens(cfg.DaemonKey), log: log, envd: http.NewServeMux()}
	services := (&agentclient.EnvdFront{Target: f.target, Redactor: f.streamRedactor()}).Handler()
	f.envd.Handle("/", services)
	f.envd.HandleFunc("/files", f.serveFiles)
	return f
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, ok := f.route(r)
	if !ok {
		if id, ok = f.signedSandbox(r); !ok {
			writeError(w, http.StatusBadRequest, "name the sandbox: the E2b-Sandbox-Id and E2b-Sandbox-Port headers, or a host <port>-<sandbox>."+f.cfg.Domain)
			return
		}
		port = EnvdPort
	}
	sb, err := f.cfg.Manager.Get(r.Context(), id)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			writeJSON(w, http.StatusBadGateway, map[string]any{"message": "The sandbox was not found", "sandboxId": id, "code": http.StatusBadGateway})
			return
		}
		writeEnvdError(w, http.StatusInternalServerError, err)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), sandboxKey{}, id))
	switch port {
	case EnvdPort:
		f.serveEnvd(w, r, sb)
	case InterpreterPort:
		if r.URL.Path == "/execute" && !f.tokens.check("envd", id, r.Header.Get(headerAccessToken)) || !f.mayReach(r, sb) {
			writeError(w, http.StatusUnauthorized, "sandbox "+id+": a wrong or missing access token")
			return
		}
		if f.cfg.Interpreter == nil {
			writeError(w, http.StatusNotImplemented, "this daemon serves no code interpreter")
			return
		}
		f.cfg.Interpreter.ServeSandbox(w, r, id)
	default:
		if !f.mayReach(r, sb) {
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

// mayReach reports whether r may reach sb's ports: its traffic is public,
// or r carries its traffic or access token.
func (f *Front) mayReach(r *http.Request, sb *sandbox.Sandbox) bool {
	if sb.Metadata[metaTemplate] != "" && sb.Metadata[metaPrivate] != "true" {
		return true
	}
	return f.tokens.check("traffic", sb.ID, r.Header.Get(headerTrafficToken)) || f.tokens.check("envd", sb.ID, r.Header.Get(headerAccessToken))
}

// serveEnvd serves envd's API: /health to anyone, /files with the token
// or a signature, the rest with the token.
func (f *Front) serveEnvd(w http.ResponseWriter, r *http.Request, sb *sandbox.Sandbox) {
	if r.URL.Path == "/health" {
		if sb.State != "running" {
			writeJSON(w, http.StatusBadGateway, map[string]any{"message": "The sandbox is not running", "sandboxId": sb.ID, "code": http.StatusBadGateway})
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	token := f.tokens.check("envd", sb.ID, r.Header.Get(headerAccessToken))
	if !token && !(r.URL.Path == "/files" && f.signed(r, sb.ID)) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"unauthenticated","message":"a wrong or missing X-Access-Token for sandbox ` + sb.ID + `"}`))
		return
	}
	f.envd.ServeHTTP(w, r)
}

// signed reports whether a /files request carries a valid signature of
// sandbox id's token, as envd checks it: "v1_" and the unpadded base64 of
// the SHA-256 of path:operation:username:token[:expiry].
func (f *Front) signed(r *http.Request, id string) bool {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + f.tokens.token("envd", id)
	if exp := q.Get("signature_expiration"); exp != "" {
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > at {
			return false
		}
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	want := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// signedSandbox finds the sandbox of a signed /files URL that names none:
// the SDK's uploadUrl and downloadUrl carry no sandbox id when
// E2B_SANDBOX_URL is set, but the signature is of one sandbox's token.
func (f *Front) signedSandbox(r *http.Request) (string, bool) {
	if r.URL.Path != "/files" || r.URL.Query().Get("signature") == "" {
		return "", false
	}
	all, err := f.cfg.Manager.List(r.Context())
	if err != nil {
		return "", false
	}
	for _, sb := range all {
		if f.signed(r, sb.ID) {
			return sb.ID, true
		}
	}
	return "", false
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
