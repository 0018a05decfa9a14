package e2b

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// The control plane: E2B's REST API (infra spec/openapi.yml; the calls of
// e2b 2.51 in E2B-COMPAT.md §2), each call made of calls to Hutch's API.
//
// How E2B's notions map:
//   - templateID: base is Hutch's base template when it is built (else the
//     daemon's default); code-interpreter-v1 is the python template; any
//     other name is a Hutch template of that name.
//   - timeout: with autoPause, the idle timeout, which suspends; without,
//     the idle timeout and the max lifetime, which delete: E2B kills a
//     sandbox at its end, however busy, and so does the lifetime.
//     setTimeout sets the same from now.
//   - pause is Hutch's suspend (memory kept under gVisor), pause without
//     memory its stop; connect resumes or starts. Calls wake a suspended
//     sandbox anyway (autoResume is Hutch's way).
//   - allow_internet_access false is network mode none; network.denyOut
//     with 0.0.0.0/0 and allowOut is an allowlist; denyOut alone is deny
//     rules over the full internet.
//   - state: running (creating and resuming too), or paused (suspended,
//     paused, stopped, error).

// metadata keys Hutch keeps of E2B's options, not shown to E2B clients.
const (
	metaTemplate  = "hutch.e2b.template"   // the templateID asked for
	metaAutoPause = "hutch.e2b.auto_pause" // "true": the timeout suspends
	metaPrivate   = "hutch.e2b.private"    // "true": ports need the traffic token
)

// defaultTimeout is a create's timeout when it names none (E2B's v2).
const defaultTimeout = 300

// ControlPlane serves E2B's control plane.
type ControlPlane struct {
	api       http.Handler
	tokens    tokens
	keys      Keys
	daemonKey string
	domain    string
	log       *slog.Logger
	mux       *http.ServeMux
}

// ControlPlaneConfig configures a ControlPlane.
type ControlPlaneConfig struct {
	// API is Hutch's API as TCP clients reach it, keys required.
	API http.Handler
	// DaemonKey is the daemon's key: sandboxes' tokens derive from it.
	DaemonKey string
	// Keys finds the caller's key, which the tokens given to it are bound
	// to (keys.go), as the front's; nil: tokens are bound to no key.
	Keys Keys
	// Domain is the sandbox front's, for the SDK's getHost: its
	// <port>-<id>.<Domain> hosts reach it ("localhost:49983").
	Domain string
	Logger *slog.Logger
}

// NewControlPlane returns the control plane; its paths are E2B's, without
// the prefix it is served under.
func NewControlPlane(cfg ControlPlaneConfig) *ControlPlane {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cp := &ControlPlane{api: cfg.API, tokens: newTokens(cfg.DaemonKey), keys: cfg.Keys, daemonKey: cfg.DaemonKey, domain: cfg.Domain, log: log, mux: http.NewServeMux()}
	for _, r := range []struct {
		pattern string
		handle  func(*call) error
	}{
		{"POST /sandboxes", cp.create},
		{"POST /v2/sandboxes", cp.create},
		{"GET /sandboxes", cp.listRunning},
		{"GET /v2/sandboxes", cp.list},
		{"GET /sandboxes/{id}", cp.get},
		{"DELETE /sandboxes/{id}", cp.kill},
		{"POST /sandboxes/{id}/timeout", cp.setTimeout},
		{"POST /sandboxes/{id}/refreshes", cp.refresh},
		{"POST /sandboxes/{id}/pause", cp.pause},
		{"POST /sandboxes/{id}/resume", cp.connect},
		{"POST /sandboxes/{id}/connect", cp.connect},
		{"POST /v2/sandboxes/{id}/connect", cp.connect},
		{"GET /sandboxes/{id}/metrics", cp.metrics},
		{"PUT /sandboxes/{id}/network", cp.updateNetwork},
		{"POST /sandboxes/{id}/fork", cp.fork},
		{"POST /sandboxes/{id}/snapshots", cp.snapshot},
		{"GET /snapshots", cp.listSnapshots},
		{"DELETE /templates/{id}", cp.deleteTemplate},
	} {
		cp.mux.HandleFunc(r.pattern, cp.serve(r.handle))
	}
	cp.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Hutch's E2B API has no "+r.Method+" "+r.URL.Path)
	})
	return cp
}

func (cp *ControlPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) { cp.mux.ServeHTTP(w, r) }

// call is one control-plane request, with a Hutch client acting as its
// key, and that key's holder: the tokens the call gives are bound to it.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	c      *client.Client
	holder holder
}

// serve authenticates a request and passes it to handle, answering its
// error in E2B's shape.
func (cp *ControlPlane) serve(handle func(*call) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-KEY")
		if key == "" {
			writeError(w, http.StatusUnauthorized, "missing X-API-KEY: set E2B_API_KEY to a key of `hutch e2b env`")
			return
		}
		h, err := resolveHolder(r.Context(), cp.keys, cp.daemonKey, hutchKey(key))
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			writeError(w, http.StatusUnauthorized, "the X-API-KEY is no key of this daemon's: set E2B_API_KEY to a key of `hutch e2b env`")
			return
		case err != nil:
			cp.log.Error("e2b: find the caller's key", "error", err)
			writeError(w, http.StatusInternalServerError, "the daemon could not look the key up")
			return
		}
		c, err := client.New("http://hutch", hutchKey(key), client.WithHTTPClient(&http.Client{Transport: inProcess{cp.api, r.RemoteAddr}}))
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if err := handle(&call{w: w, r: r, ctx: r.Context(), c: c, holder: h}); err != nil {
			writeHutchError(w, err)
		}
	}
}

// inProcess carries a Hutch client's requests to the API handler in the
// same process, from the E2B caller's address.
type inProcess struct {
	api        http.Handler
	remoteAddr string
}

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RequestURI, r.RemoteAddr = r.URL.RequestURI(), t.remoteAddr
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// writeError answers E2B's error shape: the SDKs branch on code, in the
// body.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

// writeHutchError answers err, a Hutch API error, in E2B's shape.
func writeHutchError(w http.ResponseWriter, err error) {
	var e *client.Error
	if errors.As(err, &e) && e.StatusCode >= 400 {
		writeError(w, e.StatusCode, e.Message)
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody decodes an optional JSON body into v.
func decodeBody(r *http.Request, v any) error {
	err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		return &client.Error{StatusCode: http.StatusBadRequest, Code: client.CodeInvalidArgument, Message: "the body is no JSON of this call: " + err.Error()}
	}
	return nil
}

// newSandbox is the body of a create, v1 and v2.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Network             *networkConfig    `json:"network"`
}

type networkConfig struct {
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
}

// sandboxInfo is E2B's Sandbox: what create and connect answer.
type sandboxInfo struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// sandboxDetail is E2B's SandboxDetail and ListedSandbox.
type sandboxDetail struct {
	TemplateID          string            `json:"templateID"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int64             `json:"memoryMB"`
	DiskSizeMB          int64             `json:"diskSizeMB"`
	Metadata            map[string]string `json:"metadata"`
	State               string            `json:"state"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Domain              *string           `json:"domain,omitempty"`
}

// clientID is what E2B's deprecated clientID field carries.
const clientID = "hutch"

func (cp *ControlPlane) create(c *call) error {
	var req newSandbox
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	timeout := int64(defaultTimeout)
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout < 1 {
		return badRequest("timeout must be at least 1 second, got %d", timeout)
	}
	e2bTemplate := orDefault(req.TemplateID, "base")
	meta := map[string]string{}
	for k, v := range req.Metadata {
		if strings.HasPrefix(k, "hutch.e2b.") {
			return badRequest("metadata key %q is Hutch's own", k)
		}
		meta[k] = v
	}
	meta[metaTemplate] = e2bTemplate
	meta[metaAutoPause] = strconv.FormatBool(req.AutoPause)
	if n := req.Network; n != nil && n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic {
		meta[metaPrivate] = "true"
	}
	hreq := client.CreateSandboxRequest{
		Template: cp.template(c, e2bTemplate), Env: req.EnvVars, Metadata: meta,
		IdleTimeoutS: timeout, Network: networkPolicy(req.AllowInternetAccess, req.Network),
	}
	if req.AutoPause {
		hreq.IdleAction = client.IdleSuspend
	} else {
		hreq.IdleAction, hreq.MaxLifetimeS = client.IdleDelete, timeout
	}
	sb, err := c.c.CreateSandbox(c.ctx, hreq)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, cp.sandbox(sb, c.holder))
	return nil
}

// template is the Hutch template an E2B templateID names.
func (cp *ControlPlane) template(c *call, id string) string {
	switch id {
	case "code-interpreter-v1", "code-interpreter":
		return "python"
	case "base":
		if _, err := c.c.GetTemplate(c.ctx, "base"); err != nil {
			return "" // the daemon's default
		}
	}
	return id
}

// networkPolicy is the Hutch policy of E2B's network options; nil: the
// daemon's default.
func networkPolicy(internet *bool, n *networkConfig) *client.NetworkPolicy {
	if internet != nil && !*internet {
		return &client.NetworkPolicy{Mode: client.NetworkNone}
	}
	if n == nil || len(n.AllowOut) == 0 && len(n.DenyOut) == 0 {
		return nil
	}
	if slices.Contains(n.DenyOut, "0.0.0.0/0") {
		if len(n.AllowOut) == 0 {
			return &client.NetworkPolicy{Mode: client.NetworkNone}
		}
		return &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: n.AllowOut}
	}
	return &client.NetworkPolicy{Mode: client.NetworkFull, Deny: n.DenyOut}
}

// sandbox is E2B's answer of a create or connect of sb, its tokens
// given to h.
func (cp *ControlPlane) sandbox(sb *client.Sandbox, h holder) sandboxInfo {
	out := sandboxInfo{
		TemplateID: templateOf(sb), SandboxID: sb.ID, ClientID: clientID, EnvdVersion: EnvdVersion,
		EnvdAccessToken: cp.tokens.token("envd", sb.ID, h),
	}
	if cp.domain != "" {
		out.Domain = &cp.domain
	}
	if sb.Metadata[metaPrivate] == "true" {
		t := cp.tokens.token("traffic", sb.ID, h)
		out.TrafficAccessToken = &t
	}
	return out
}

func templateOf(sb *client.Sandbox) string { return orDefault(sb.Metadata[metaTemplate], sb.Template) }

// detail is E2B's description of sb; withToken adds its envd token,
// given to h (getInfo's, not list's).
func (cp *ControlPlane) detail(sb *client.Sandbox, withToken bool, h holder) sandboxDetail {
	meta := map[string]string{}
	for k, v := range sb.Metadata {
		if !strings.HasPrefix(k, "hutch.e2b.") {
			meta[k] = v
		}
	}
	d := sandboxDetail{
		TemplateID: templateOf(sb), SandboxID: sb.ID, ClientID: clientID, StartedAt: sb.CreatedAt, EndAt: sb.ExpiresAt,
		CPUCount: max(1, int(sb.CPUs+0.5)), MemoryMB: sb.MemoryMB, DiskSizeMB: sb.DiskMB, Metadata: meta,
		State: state(sb.State), EnvdVersion: EnvdVersion,
	}
	if withToken {
		d.EnvdAccessToken = cp.tokens.token("envd", sb.ID, h)
		internet := sb.Network.Mode != client.NetworkNone
		d.AllowInternetAccess = &internet
		if cp.domain != "" {
			d.Domain = &cp.domain
		}
	}
	return d
}

// state is E2B's state of a Hutch state.
func state(s string) string {
	switch s {
	case "running", "creating", "resuming":
		return "running"
	}
	return "paused"
}

func (cp *ControlPlane) get(c *call) error {
	sb, err := c.c.GetSandbox(c.ctx, c.r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, cp.detail(sb, true, c.holder))
	return nil
}

// listRunning is v1's list: running sandboxes, all at once.
func (cp *ControlPlane) listRunning(c *call) error {
	all, err := c.c.ListSandboxes(c.ctx)
	if err != nil {
		return err
	}
	out := []sandboxDetail{}
	for i := range all {
		if state(all[i].State) == "running" {
			out = append(out, cp.detail(&all[i], false, holder{}))
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// maxListLimit bounds a page of v2's list, as E2B's.
const maxListLimit = 100

// list is v2's list: filtered by state, metadata, template and start,
// oldest or newest first, a page at a time (the next page's token in the
// x-next-token header).
func (cp *ControlPlane) list(c *call) error {
	q := c.r.URL.Query()
	states := []string{"running", "paused"}
	if s := q.Get("state"); s != "" {
		states = strings.Split(s, ",")
	}
	meta, err := metadataFilter(q.Get("metadata"))
	if err != nil {
		return err
	}
	var after time.Time
	if s := q.Get("startedAfter"); s != "" {
		if after, err = time.Parse(time.RFC3339, s); err != nil {
			return badRequest("startedAfter must be an RFC 3339 time, got %q", s)
		}
	}
	limit, err := listLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	all, err := c.c.ListSandboxes(c.ctx)
	if err != nil {
		return err
	}
	var out []sandboxDetail
	for i := range all {
		d := cp.detail(&all[i], false, holder{})
		if !slices.Contains(states, d.State) || d.StartedAt.Before(after) ||
			q.Get("template") != "" && d.TemplateID != q.Get("template") || !hasMetadata(d.Metadata, meta) {
			continue
		}
		out = append(out, d)
	}
	// Newest first unless asked otherwise; the id breaks ties.
	slices.SortFunc(out, func(a, b sandboxDetail) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return -c
		}
		return strings.Compare(a.SandboxID, b.SandboxID)
	})
	if q.Get("order") == "asc" {
		slices.Reverse(out)
	}
	if tok := q.Get("nextToken"); tok != "" {
		id, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return badRequest("nextToken %q is not one this API gave", tok)
		}
		i := slices.IndexFunc(out, func(d sandboxDetail) bool { return d.SandboxID == string(id) })
		out = out[i+1:] // -1 (gone since): from the start
	}
	if len(out) > limit {
		out = out[:limit]
		c.w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(out[limit-1].SandboxID)))
	}
	if out == nil {
		out = []sandboxDetail{}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// listLimit is a page's size, from a list's limit parameter ("": the
// most).
func listLimit(s string) (int, error) {
	if s == "" {
		return maxListLimit, nil
	}
	limit, err := strconv.Atoi(s)
	if err != nil || limit < 1 || limit > maxListLimit {
		return 0, badRequest("limit must be from 1 to %d, got %q", maxListLimit, s)
	}
	return limit, nil
}

// metadataFilter decodes list's metadata filter as E2B does: the SDK
// encodes it three times over (key=value pairs joined by &, the whole
// escaped, then escaped again as a query value).
func metadataFilter(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	whole, err := url.QueryUnescape(s)
	if err != nil {
		return nil, badRequest("metadata filter %q is not URL-encoded", s)
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(whole, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if k, err = url.QueryUnescape(k); err == nil {
			v, err = url.QueryUnescape(v)
		}
		if err != nil {
			return nil, badRequest("metadata filter %q is not URL-encoded", s)
		}
		out[k] = v
	}
	return out, nil
}

func hasMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// kill deletes: 204, or E2B's 404 (the SDK's kill then says false).
func (cp *ControlPlane) kill(c *call) error {
	if err := c.c.DeleteSandbox(c.ctx, c.r.PathValue("id")); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// setTimeout sets the sandbox's end timeout seconds from now: its idle
// timeout, and its lifetime unless it pauses at the end.
func (cp *ControlPlane) setTimeout(c *call) error {
	var req struct {
		Timeout int64 `json:"timeout"`
	}
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	if req.Timeout < 1 {
		return badRequest("timeout must be at least 1 second, got %d", req.Timeout)
	}
	id := c.r.PathValue("id")
	sb, err := c.c.GetSandbox(c.ctx, id)
	if err != nil {
		return err
	}
	if _, err := c.c.UpdateSandbox(c.ctx, id, timeoutUpdate(sb, req.Timeout)); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// timeoutUpdate sets sb's end seconds from now: its idle timeout, and its
// lifetime unless it pauses at the end.
func timeoutUpdate(sb *client.Sandbox, seconds int64) client.UpdateSandboxRequest {
	upd := client.UpdateSandboxRequest{IdleTimeoutS: seconds}
	if sb.Metadata[metaAutoPause] != "true" && sb.IdleAction == client.IdleDelete {
		upd.MaxLifetimeS = seconds
	}
	return upd
}

// refresh is E2B's keepalive: the idle timer starts again.
func (cp *ControlPlane) refresh(c *call) error {
	id := c.r.PathValue("id")
	sb, err := c.c.GetSandbox(c.ctx, id)
	if err != nil {
		return err
	}
	if _, err := c.c.UpdateSandbox(c.ctx, id, client.UpdateSandboxRequest{IdleTimeoutS: sb.IdleTimeoutS}); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// pause suspends (memory kept under gVisor), or with memory false stops;
// 409 when the sandbox is not running (the SDK's pause then says false).
func (cp *ControlPlane) pause(c *call) error {
	var req struct {
		Memory *bool `json:"memory"`
	}
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	sb, err := c.c.GetSandbox(c.ctx, id)
	if err != nil {
		return err
	}
	if state(sb.State) != "running" {
		writeError(c.w, http.StatusConflict, "sandbox "+id+" is already paused")
		return nil
	}
	halt := c.c.SuspendSandbox
	if req.Memory != nil && !*req.Memory {
		halt = c.c.StopSandbox
	}
	// A call the SDK just made may hold the sandbox a moment after its
	// answer (its connection's end): Hutch refuses to halt under it, and
	// E2B's pause waits instead.
	for deadline := time.Now().Add(pauseWait); ; time.Sleep(10 * time.Millisecond) {
		_, err = halt(c.ctx, id)
		if !client.IsConflict(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseWait bounds how long a pause waits for the calls in flight.
const pauseWait = 5 * time.Second

// connect wakes a paused sandbox (201) or finds it running (200), and
// extends its timeout when the body gives one (never shortens it).
func (cp *ControlPlane) connect(c *call) error {
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	sb, err := c.c.GetSandbox(c.ctx, id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	switch sb.State {
	case "stopped":
		sb, err = c.c.StartSandbox(c.ctx, id)
		status = http.StatusCreated
	case "suspended", "error":
		sb, err = c.c.ResumeSandbox(c.ctx, id)
		status = http.StatusCreated
	case "paused":
		sb, err = c.c.UnpauseSandbox(c.ctx, id)
		status = http.StatusCreated
	}
	if err != nil {
		return err
	}
	if req.Timeout != nil && *req.Timeout > sb.IdleTimeoutS {
		if sb, err = c.c.UpdateSandbox(c.ctx, id, timeoutUpdate(sb, *req.Timeout)); err != nil {
			return err
		}
	}
	writeJSON(c.w, status, cp.sandbox(sb, c.holder))
	return nil
}

// metrics answers the sandbox's samples between ?start= and ?end= (Unix
// seconds; either may be left out), as E2B's SandboxMetric; a running
// sandbox not sampled yet answers one reading, now.
func (cp *ControlPlane) metrics(c *call) error {
	id := c.r.PathValue("id")
	start, end, err := unixRange(c.r)
	if err != nil {
		return err
	}
	sb, err := c.c.GetSandbox(c.ctx, id)
	if err != nil {
		return err
	}
	if !start.IsZero() {
		start = start.Add(-time.Nanosecond) // E2B's start is inclusive
	}
	m, err := c.c.SandboxMetrics(c.ctx, id, start)
	if err != nil {
		return err
	}
	cpus := max(1, int(sb.CPUs+0.5))
	out := []map[string]any{}
	for _, smp := range m.Samples {
		if !end.IsZero() && smp.Time.After(end) {
			break
		}
		// E2B's percent is of its cpuCount, Hutch's of its limit.
		pct := smp.CPUPercent
		if smp.CPUs > 0 {
			pct *= smp.CPUs / float64(cpus)
		}
		out = append(out, metric(smp.Time, cpus, pct, smp.MemoryBytes, smp.MemoryLimitBytes, smp.DiskUsedBytes, smp.DiskLimitBytes))
	}
	if len(m.Samples) == 0 && sb.State == client.StateRunning {
		st, err := c.c.Stats(c.ctx, id)
		if err != nil {
			return err
		}
		out = append(out, metric(time.Now().UTC(), cpus, 0, st.MemoryBytes, st.MemoryLimitBytes, st.DiskUsedBytes, sb.DiskMB<<20))
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// metric is one of E2B's SandboxMetric.
func metric(at time.Time, cpus int, cpuPct float64, mem, memTotal, disk, diskTotal int64) map[string]any {
	return map[string]any{
		"timestamp": at, "timestampUnix": at.Unix(), "cpuCount": cpus, "cpuUsedPct": cpuPct,
		"memUsed": mem, "memTotal": memTotal, "memCache": 0, "diskUsed": disk, "diskTotal": diskTotal,
	}
}

// unixRange reads ?start= and ?end=, Unix seconds; zero where left out.
func unixRange(r *http.Request) (start, end time.Time, err error) {
	read := func(name string) (time.Time, error) {
		v := r.URL.Query().Get(name)
		if v == "" {
			return time.Time{}, nil
		}
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, errdefs.InvalidArgument("%s must be Unix seconds, got %q", name, v)
		}
		return time.Unix(secs, 0).UTC(), nil
	}
	if start, err = read("start"); err != nil {
		return
	}
	end, err = read("end")
	return
}

// updateNetwork sets the sandbox's network policy from E2B's options.
func (cp *ControlPlane) updateNetwork(c *call) error {
	var req struct {
		networkConfig
		AllowInternetAccess *bool `json:"allowInternetAccess"`
	}
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	p := networkPolicy(req.AllowInternetAccess, &req.networkConfig)
	if p == nil {
		p = &client.NetworkPolicy{Mode: client.NetworkFull}
	}
	if _, err := c.c.SetNetwork(c.ctx, c.r.PathValue("id"), *p); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// fork makes count copies of the sandbox, each answered as a create's.
func (cp *ControlPlane) fork(c *call) error {
	var req struct {
		Count int `json:"count"`
	}
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	res, err := c.c.Fork(c.ctx, c.r.PathValue("id"), max(1, req.Count))
	if err != nil {
		return err
	}
	// The copies made, and an error in the place of each that was not.
	out := []map[string]any{}
	for i := range res.Sandboxes {
		out = append(out, map[string]any{"sandbox": cp.sandbox(&res.Sandboxes[i], c.holder)})
	}
	for _, e := range res.Errors {
		out = append(out, map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}})
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// snapshot makes a template of the sandbox's files (Hutch's snapshot).
func (cp *ControlPlane) snapshot(c *call) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeBody(c.r, &req); err != nil {
		return err
	}
	if req.Name == "" { // E2B names it; Hutch's templates need a name
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix)
		req.Name = "snapshot-" + c.r.PathValue("id") + "-" + hex.EncodeToString(suffix)
	}
	t, err := c.c.SnapshotSandbox(c.ctx, c.r.PathValue("id"), req.Name)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, map[string]any{"snapshotID": t.Name, "names": []string{t.Name}})
	return nil
}

// listSnapshots lists the snapshots the key sees (templates made from a
// sandbox), filtered by sandboxID and name, a page at a time.
func (cp *ControlPlane) listSnapshots(c *call) error {
	q := c.r.URL.Query()
	limit, err := listLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	all, err := c.c.ListTemplates(c.ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range all {
		if t.Sandbox != "" && (q.Get("sandboxID") == "" || t.Sandbox == q.Get("sandboxID")) && (q.Get("name") == "" || t.Name == q.Get("name")) {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	if tok := q.Get("nextToken"); tok != "" {
		after, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return badRequest("nextToken %q is not one this API gave", tok)
		}
		i, _ := slices.BinarySearch(names, string(after)+"\x00")
		names = names[i:]
	}
	if len(names) > limit {
		names = names[:limit]
		c.w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(names[limit-1])))
	}
	out := []map[string]any{}
	for _, n := range names {
		out = append(out, map[string]any{"snapshotID": n, "names": []string{n}})
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (cp *ControlPlane) deleteTemplate(c *call) error {
	if err := c.c.DeleteTemplate(c.ctx, c.r.PathValue("id")); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func badRequest(format string, args ...any) error {
	return &client.Error{StatusCode: http.StatusBadRequest, Code: client.CodeInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
