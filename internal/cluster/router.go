package cluster

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// RouterStore is what a Router reads of the store.
type RouterStore interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	ListNodes(ctx context.Context) ([]*store.Node, error)
	MoveSandbox(ctx context.Context, id, from, to string, at time.Time) error
}

// KeyLookup finds the API key a caller gave (apikeys.Service has it):
// ErrNotFound when it is none.
type KeyLookup interface {
	Lookup(ctx context.Context, key string) (*apikeys.Key, error)
}

// RouterConfig wires a Router.
type RouterConfig struct {
	Store RouterStore
	// Nodes is how the replica calls nodes: pinned TLS and the cluster
	// key (required).
	Nodes *NodeTransport
	// AdminKey is the daemon's own key, and Keys the others': a call that
	// would move a lost node's sandbox must carry one that may see it.
	AdminKey string
	Keys     KeyLookup
	// PreviewDomain is the domain of previews' hosts,
	// {port}-{sandbox}.DOMAIN ("": path routing only), as the nodes'.
	PreviewDomain string
	// Timeout: nodes not heard from for longer get no calls
	// (DefaultTimeout when 0).
	Timeout time.Duration
	// Sample is the placement's K (DefaultSample when 0).
	Sample int
	// Self is this replica's API as it reaches itself (http://127.0.0.1:
	// its port), which MCP's tools call; Version is told to MCP clients.
	Self, Version string
	Logger        *slog.Logger
}

// Router is an API replica's handler: it sends each call on to a node,
// as it came (the node checks the caller's key, as a single box does),
// over TLS pinned to the node's certificate and with the cluster key
// (NodeTransport): a call about a sandbox to the node holding it, a
// create to the node placement picks, anything else to any node up,
// since every node answers it from the shared store. What it does
// itself: moving a lost node's suspended sandbox to another node, only
// for a caller whose key may see that sandbox (mayMove), and listing the
// nodes, lost ones too, to the administrator (serveNodes).
type Router struct {
	cfg RouterConfig
	// e2b: this Router is E2B's sandbox front's, sending calls to the
	// nodes' fronts (NewE2BRouter).
	e2b    bool
	log    *slog.Logger
	placer *Placer
	proxy  *httputil.ReverseProxy
	mcp    *mcpSessions

	mu       sync.Mutex
	nodes    []*store.Node
	listedAt time.Time
}

// nodesFresh is how long a replica's list of nodes serves before it is
// read again: placement sees a node's new report within it.
const nodesFresh = time.Second

// NewRouter returns a Router.
func NewRouter(cfg RouterConfig) *Router {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := &Router{cfg: cfg, log: log, placer: &Placer{Sample: cfg.Sample, Timeout: cfg.Timeout}, mcp: &mcpSessions{self: cfg.Self, version: cfg.Version}}
	rt.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targetOf(pr.In.Context()).url)
			// The node routes previews by the host the caller named, and
			// makes its URLs with it.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: &redirecting{rt: rt},
		// Streams (exec's output, events, logs) go on as they come.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t := targetOf(r.Context())
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the caller left
			}
			api.WriteError(w, r, log, errdefs.BadGateway("node %s did not answer: %v", t.node, err))
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return rt
}

// NewE2BRouter returns the Router of E2B's sandbox front on an API replica
// (--e2b-listen): a call goes to the front of the node holding the
// sandbox its E2b-Sandbox-Id header or its host ({port}-{sandbox}.…)
// names.
func NewE2BRouter(cfg RouterConfig) *Router {
	cfg.Self = "" // no MCP there
	rt := NewRouter(cfg)
	rt.e2b = true
	return rt
}

// target is where a call goes, and how.
type target struct {
	node string
	url  *url.URL
	rt   http.RoundTripper
}

type targetKey struct{}

func targetOf(ctx context.Context) target {
	t, _ := ctx.Value(targetKey{}).(target)
	return t
}

func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isInternal(r.URL.Path) {
		// Nodes' own calls: the cluster key the replica adds to what it
		// sends on must not open them to a caller.
		api.WriteError(w, r, rt.log, errdefs.NotFound("no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	if r.URL.Path == mcpPath && rt.cfg.Self != "" && !isPreviewHost(r, rt.cfg.PreviewDomain) {
		rt.mcp.ServeHTTP(w, r, rt)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == nodesPath && !rt.e2b && !isPreviewHost(r, rt.cfg.PreviewDomain) {
		rt.serveNodes(w, r)
		return
	}
	t, err := rt.route(w, r)
	if err != nil {
		api.WriteError(w, r, rt.log, err)
		return
	}
	rt.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// route chooses r's node. A create's body is read (and put back) for
// what it asks of the node.
func (rt *Router) route(w http.ResponseWriter, r *http.Request) (target, error) {
	nodes, err := rt.listNodes(r.Context())
	if err != nil {
		return target{}, err
	}
	if rt.e2b {
		if id := e2bSandboxOf(r); id != "" {
			return rt.holder(r, id, nodes)
		}
		return rt.anyNode(nodes)
	}
	if isCreate(r) {
		want, err := readWant(w, r)
		if err != nil {
			return target{}, err
		}
		n, err := rt.placer.Place(nodes, want)
		if err != nil {
			return target{}, err
		}
		return rt.targetFor(n)
	}
	if id := sandboxOf(r, rt.cfg.PreviewDomain); id != "" {
		return rt.holder(r, id, nodes)
	}
	return rt.anyNode(nodes)
}

// holder is the target of a call about sandbox id: the node holding it.
// Its record any node tells; for the rest, a lost holder is an error
// saying so.
func (rt *Router) holder(r *http.Request, id string, nodes []*store.Node) (target, error) {
	sb, err := rt.cfg.Store.GetSandbox(r.Context(), id)
	if errors.Is(err, errdefs.ErrNotFound) || err == nil && sb.Node == "" {
		return rt.anyNode(nodes) // which says it is not found as the API does
	}
	if err != nil {
		return target{}, err
	}
	if !slices.ContainsFunc(nodes, func(n *store.Node) bool { return n.ID == sb.Node }) {
		// A node that joined since this replica's list was read (another
		// replica placed the sandbox there): read it again.
		if nodes, err = rt.readNodes(r.Context()); err != nil {
			return target{}, err
		}
	}
	for _, n := range nodes {
		if n.ID != sb.Node {
			continue
		}
		if fresh(n, rt.cfg.Timeout, time.Now().UTC()) {
			return rt.targetFor(n)
		}
		if isRecordRead(r, id) {
			return rt.anyNode(nodes)
		}
		if sb.State == store.Suspended && sb.Image != "" {
			if err := rt.mayMove(r, sb); err != nil {
				return target{}, err
			}
			return rt.move(r, sb, nodes)
		}
		return target{}, errdefs.Unavailable("sandbox %s is on node %s, which does not answer: %s", id, n.ID, lostReason(n))
	}
	return target{}, errdefs.Unavailable("sandbox %s is on node %s, which is not a member", id, sb.Node)
}

// move hands suspended sandbox sb, whose node does not answer, to a node
// placement picks among those with its template's version; that node's
// resume makes it from its image in the shared image store. Of replicas
// moving it at once, the store lets one; the others follow it.
func (rt *Router) move(r *http.Request, sb *store.Sandbox, nodes []*store.Node) (target, error) {
	n, err := rt.placer.Place(nodes, Want{Template: sb.Template, TemplateVersion: sb.TemplateVersion, Runtime: sb.Backend, MemoryMB: sb.MemoryMB, CPUs: sb.CPUs})
	if err != nil {
		return target{}, err
	}
	if !canRun(n, Want{Template: sb.Template, TemplateVersion: sb.TemplateVersion, Runtime: sb.Backend}) {
		return target{}, errdefs.Unavailable("sandbox %s is on node %s, which does not answer, and no node up has template %s@%s and runtime %s to resume it on",
			sb.ID, sb.Node, sb.Template, sb.TemplateVersion, sb.Backend)
	}
	err = rt.cfg.Store.MoveSandbox(r.Context(), sb.ID, sb.Node, n.ID, time.Now().UTC())
	if errors.Is(err, errdefs.ErrConflict) {
		moved, gerr := rt.cfg.Store.GetSandbox(r.Context(), sb.ID)
		if gerr != nil {
			return target{}, gerr
		}
		for _, other := range nodes {
			if other.ID == moved.Node && fresh(other, rt.cfg.Timeout, time.Now().UTC()) {
				return rt.targetFor(other) // another replica moved it there
			}
		}
		return target{}, err
	}
	if err != nil {
		return target{}, err
	}
	rt.log.Info("suspended sandbox of a lost node moved", "sandbox_id", sb.ID, "from", sb.Node, "to", n.ID, "image", sb.Image)
	return rt.targetFor(n)
}

// lostReason says why node n, not heard from, is lost: the reason it was
// marked lost with, or (until the mark, or until this replica's list of
// nodes has it) the same in other words.
func lostReason(n *store.Node) string {
	if n.Reason != "" {
		return n.Reason
	}
	return fmt.Sprintf("node %s lost: no heartbeat since %s", n.ID, n.HeartbeatAt.Format(time.RFC3339))
}

// anyNode is a node up, chosen at random.
func (rt *Router) anyNode(nodes []*store.Node) (target, error) {
	now := time.Now().UTC()
	var up []*store.Node
	for _, n := range nodes {
		if fresh(n, rt.cfg.Timeout, now) {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return target{}, errdefs.Unavailable("no node is up: start one with hutch serve --role node and this --store")
	}
	return rt.targetFor(up[rand.IntN(len(up))]) // #nosec G404 -- spreading load, not a secret
}

func (rt *Router) targetFor(n *store.Node) (target, error) {
	raw := n.URL
	if rt.e2b {
		if raw = n.Report.E2BURL; raw == "" {
			return target{}, errdefs.Unavailable("node %s serves no E2B sandbox front (its --e2b-listen)", n.ID)
		}
	}
	u, via, err := rt.cfg.Nodes.To(n, raw)
	if err != nil {
		return target{}, err
	}
	return target{node: n.ID, url: u, rt: via}, nil
}

// listNodes returns the nodes, read from the store at most every
// nodesFresh.
func (rt *Router) listNodes(ctx context.Context) ([]*store.Node, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if time.Since(rt.listedAt) < nodesFresh && rt.nodes != nil {
		return rt.nodes, nil
	}
	return rt.readNodesLocked(ctx)
}

// readNodes reads the nodes from the store now.
func (rt *Router) readNodes(ctx context.Context) ([]*store.Node, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.readNodesLocked(ctx)
}

func (rt *Router) readNodesLocked(ctx context.Context) ([]*store.Node, error) {
	nodes, err := rt.cfg.Store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	rt.nodes, rt.listedAt = nodes, time.Now()
	rt.cfg.Nodes.Keep(nodes)
	return nodes, nil
}

// nodeTarget is node id's target, from the last list.
func (rt *Router) nodeTarget(id string) (target, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, n := range rt.nodes {
		if n.ID == id {
			t, err := rt.targetFor(n)
			return t, err == nil
		}
	}
	return target{}, false
}

// isCreate says whether r creates a sandbox: Hutch's create, or E2B's
// (its control plane is under /e2b).
func isCreate(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	switch r.URL.Path {
	case "/v1/sandboxes", "/e2b/sandboxes", "/e2b/v2/sandboxes":
		return true
	}
	return false
}

// readWant reads what a create's body asks of a node, and puts the body
// back to be sent on (and again, should the node send it elsewhere). A
// body that does not read as a create is the node's to refuse.
func readWant(w http.ResponseWriter, r *http.Request) (Want, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxCreateBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Want{}, errdefs.TooLarge("the request body is over %d bytes", tooLarge.Limit)
		}
		return Want{}, errdefs.InvalidArgument("read the request body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	var req struct {
		Template   string  `json:"template"`
		TemplateID string  `json:"templateID"` // E2B's
		Runtime    string  `json:"runtime"`
		MemoryMB   int64   `json:"memory_mb"`
		CPUs       float64 `json:"cpus"`
	}
	_ = json.Unmarshal(body, &req)
	want := Want{Template: req.Template, Runtime: req.Runtime, MemoryMB: req.MemoryMB, CPUs: req.CPUs}
	if want.Template == "" {
		want.Template = req.TemplateID
	}
	if want.MemoryMB <= 0 {
		want.MemoryMB = create.DefaultMemoryMB
	}
	if want.CPUs <= 0 {
		want.CPUs = create.DefaultCPUs
	}
	return want, nil
}

// sandboxOf is the sandbox r is about: a preview's host, or the API's
// paths naming one (Hutch's, and E2B's control plane's); "" for none.
func sandboxOf(r *http.Request, domain string) string {
	if domain != "" {
		if t, ok := preview.ParseHost(r.Host, domain); ok {
			return t.Sandbox
		}
	}
	for _, prefix := range []string{"/v1/sandboxes/", "/e2b/sandboxes/", "/e2b/v2/sandboxes/"} {
		if rest, ok := strings.CutPrefix(r.URL.Path, prefix); ok {
			id, _, _ := strings.Cut(rest, "/")
			return id
		}
	}
	return ""
}

// isPreviewHost says whether r's host is a preview's (whose paths are
// the sandbox's own).
func isPreviewHost(r *http.Request, domain string) bool {
	if domain == "" {
		return false
	}
	_, ok := preview.ParseHost(r.Host, domain)
	return ok
}

// e2bSandboxOf is the sandbox a call to E2B's sandbox front is about:
// its E2b-Sandbox-Id header, or its host's first label, {port}-{sandbox}
// (whatever the domain); "" for none.
func e2bSandboxOf(r *http.Request) string {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		return id
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, _, _ := strings.Cut(host, ".")
	if _, id, ok := strings.Cut(label, "-"); ok && label != host {
		return strings.ToLower(id)
	}
	return ""
}

// isRecordRead says whether r only reads sandbox id's record, which any
// node tells from the store.
func isRecordRead(r *http.Request, id string) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/v1/sandboxes/"+id || r.URL.Path == "/e2b/sandboxes/"+id)
}

// redirecting sends a call again, once, to the node a misdirected answer
// names: the holder of a keyed sandbox another node made first. Only a
// call whose body can be sent again (a create's, read by readWant, or
// none) is.
type redirecting struct {
	rt *Router
}

func (t *redirecting) RoundTrip(req *http.Request) (*http.Response, error) {
	first := targetOf(req.Context())
	if first.rt == nil {
		return nil, fmt.Errorf("no way to node %s", first.node)
	}
	resp, err := first.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		return resp, err
	}
	node := resp.Header.Get(api.HeaderNode)
	next, ok := t.rt.nodeTarget(node)
	if !ok || req.Body != nil && req.GetBody == nil {
		return resp, nil
	}
	u := next.url
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	again.URL.Scheme, again.URL.Host = u.Scheme, u.Host
	_ = resp.Body.Close()
	t.rt.log.Debug("call sent again to the node holding its sandbox", "node", node, "path", req.URL.Path)
	return next.rt.RoundTrip(again)
}

// errUnauthenticated is what a node answers a call with no key, or a
// wrong one.
var errUnauthenticated = errdefs.Unauthenticated(
	"missing or wrong API key: send 'Authorization: Bearer <key>' (the daemon's own key is in its data dir, api.key)")

// mayMove says whether r's caller may have sandbox sb, whose node is
// lost, moved to another node: its key is the daemon's own, or one of
// sb's workspace. Otherwise it is answered as a node would answer it
// (401 for no key or a wrong one, 404 for another workspace's), and
// nothing moves. Calls to E2B's sandbox front carry no API key: they do
// not move sandboxes.
func (rt *Router) mayMove(r *http.Request, sb *store.Sandbox) error {
	if rt.e2b {
		return errdefs.Unavailable("sandbox %s is on node %s, which does not answer: resume it through the API, which moves it to another node", sb.ID, sb.Node)
	}
	admin, k, err := rt.keyOf(r)
	switch {
	case err != nil:
		return err
	case !admin && k.Workspace != sb.Workspace:
		return errdefs.NotFound("sandbox %s not found", sb.ID)
	}
	return nil
}

// keyOf is who r's caller is, as a node would tell: the administrator
// (the daemon's own key, which sees every workspace), or a key of the
// store's; errUnauthenticated for no key or a wrong one.
func (rt *Router) keyOf(r *http.Request) (admin bool, k *apikeys.Key, err error) {
	key, ok := presentedKey(r)
	switch {
	case !ok || key == "":
		return false, nil, errUnauthenticated
	case rt.cfg.AdminKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(rt.cfg.AdminKey)) == 1:
		return true, nil, nil
	case rt.cfg.Keys == nil:
		return false, nil, errUnauthenticated
	}
	k, err = rt.cfg.Keys.Lookup(r.Context(), key)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, nil, errUnauthenticated
	}
	if err != nil {
		return false, nil, err
	}
	return false, k, nil
}

// presentedKey is the API key r presents, as a node reads it: its
// Authorization header's bearer token; E2B's control plane's X-API-Key;
// for a WebSocket without either, the key it offers as a subprotocol
// (hutch.bearer.KEY).
func presentedKey(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		return strings.CutPrefix(h, "Bearer ")
	}
	if k := r.Header.Get("X-API-Key"); k != "" && strings.HasPrefix(r.URL.Path, "/e2b/") {
		return k, true
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return "", false
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if key, ok := strings.CutPrefix(strings.TrimSpace(p), "hutch.bearer."); ok {
				return key, true
			}
		}
	}
	return "", false
}
