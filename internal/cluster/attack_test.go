package cluster

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
	"github.com/hutchdev/hutch/internal/storage/store/storetest"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// The cluster's trust boundaries (docs/security.md): replica → node and
// node → node. What an attacker has: a tenant's key (or none), the
// network between the daemons, a node's address.

const adminKey = "hutch_the-daemons-own-key-0123456789"

// fakeNode is a node's listener as the daemon serves it: TLS with its
// own certificate, behind the cluster key (NodeGuard), in front of an
// API that answers 200 and records what reached it.
type fakeNode struct {
	id    Identity
	addr  string
	mu    sync.Mutex
	seen  []*http.Request // what reached the API, behind the guard
	wire  []http.Header   // what reached the listener, before the guard
	calls int
}

func startFakeNode(t *testing.T, clusterKey string, templates *rootfs.Store) *fakeNode {
	t.Helper()
	id, err := LoadIdentity(filepath.Join(t.TempDir(), "cluster-tls.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{id: id, addr: ln.Addr().String()}
	apiHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.Clone(r.Context()))
		n.mu.Unlock()
		_, _ = io.WriteString(w, "the node's API")
	})
	guarded := (&NodeGuard{Key: clusterKey, Templates: templates}).Wrap(apiHandler)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.mu.Lock()
			n.calls++
			n.wire = append(n.wire, r.Header.Clone())
			n.mu.Unlock()
			guarded.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // the refused handshakes
	}
	go func() { _ = srv.Serve(id.Listen(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return n
}

// reached is how many calls reached n's API, behind its guard.
func (n *fakeNode) reached() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.seen)
}

func (n *fakeNode) record(id string) *store.Node {
	return &store.Node{
		ID: id, URL: "https://" + n.addr, Fingerprint: n.id.Fingerprint, State: store.NodeUp,
		StartedAt: time.Now().UTC(), HeartbeatAt: time.Now().UTC(),
		Report: store.NodeReport{
			CPUs: 8, MemoryMB: 32768, Runtimes: []string{"runc"}, DefaultRuntime: "runc", DefaultTemplate: "host",
			Templates: map[string]string{"host": "1"},
		},
	}
}

// openStore is a fresh SQLite store.
func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// startReplica serves a Router over db, as an API replica does.
func startReplica(t *testing.T, db *sqlite.DB) *httptest.Server {
	t.Helper()
	rt := NewRouter(RouterConfig{Store: db, Nodes: NewNodeTransport(DeriveKey(adminKey)), AdminKey: adminKey, Keys: apikeys.New(db, nil)})
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, u string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A node's listener speaks TLS only: a call in plain HTTP, the cluster
// key and the daemon's key in it, is refused before the node reads it.
// A replica sends nothing to a node whose certificate is not the one
// the store names for it, nor to a node whose URL is plain http.
func TestAttackClusterPlainHTTP(t *testing.T) {
	ck := DeriveKey(adminKey)
	t.Run("node refuses plain http", func(t *testing.T) {
		n := startFakeNode(t, ck, nil)
		code, body := call(t, http.MethodGet, "http://"+n.addr+"/v1/sandboxes", http.Header{
			"Authorization": {"Bearer " + adminKey}, HeaderClusterKey: {ck},
		})
		if code != http.StatusBadRequest || n.calls != 0 {
			t.Errorf("plain http to a node: %d %q, %d calls read; want 400 and none", code, body, n.calls)
		}
	})
	t.Run("replica refuses a certificate the store does not name", func(t *testing.T) {
		db := openStore(t)
		n := startFakeNode(t, ck, nil)
		impostor, err := LoadIdentity(filepath.Join(t.TempDir(), "other.pem"))
		if err != nil {
			t.Fatal(err)
		}
		rec := n.record("b")
		rec.Fingerprint = impostor.Fingerprint
		if err := db.PutNode(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		replica := startReplica(t, db)
		code, body := call(t, http.MethodGet, replica.URL+"/v1/sandboxes", http.Header{"Authorization": {"Bearer " + adminKey}})
		if code != http.StatusBadGateway || n.calls != 0 {
			t.Errorf("a node whose certificate the store does not name: %d %q, %d calls reached it; want 502 and none", code, body, n.calls)
		}
		// The one it names: the call goes through, the caller's key with
		// it, the cluster key removed before the node's API.
		if err := db.PutNode(t.Context(), n.record("b")); err != nil {
			t.Fatal(err)
		}
		replica = startReplica(t, db)
		code, body = call(t, http.MethodGet, replica.URL+"/v1/sandboxes", http.Header{"Authorization": {"Bearer hutch_tenant"}, HeaderClusterKey: {"forged"}})
		if code != http.StatusOK || n.reached() != 1 {
			t.Fatalf("the node the store names: %d %q, %d calls", code, body, n.reached())
		}
		if got := n.seen[0].Header; got.Get("Authorization") != "Bearer hutch_tenant" || got.Get(HeaderClusterKey) != "" {
			t.Errorf("the node's API got %v: want the caller's key and no cluster key", got)
		}
		if got := n.wire[len(n.wire)-1].Get(HeaderClusterKey); got != ck {
			t.Errorf("the replica sent cluster key %q (a caller's forged one?), want its own", got)
		}
	})
	t.Run("replica refuses an http node", func(t *testing.T) {
		db := openStore(t)
		var plainCalls int
		var mu sync.Mutex
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			plainCalls++
			mu.Unlock()
		}))
		t.Cleanup(plain.Close)
		rec := (&fakeNode{}).record("old")
		rec.URL, rec.Fingerprint = plain.URL, ""
		if err := db.PutNode(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
		replica := startReplica(t, db)
		code, body := call(t, http.MethodGet, replica.URL+"/v1/sandboxes", http.Header{"Authorization": {"Bearer " + adminKey}})
		mu.Lock()
		defer mu.Unlock()
		if code != http.StatusServiceUnavailable || plainCalls != 0 {
			t.Errorf("a node at an http URL: %d %q, %d calls sent to it in plain; want 503 and none", code, body, plainCalls)
		}
	})
}

// A suspended sandbox of a lost node moves to another node only for a
// caller whose key may see it: no key, a wrong one, or another
// workspace's (however presented) gets the node's own answer (401, 404)
// and nothing moves.
func TestAttackClusterMoveUnauthenticated(t *testing.T) {
	ctx := t.Context()
	db := openStore(t)
	keys := apikeys.New(db, nil)
	acme, _, err := keys.Create(ctx, apikeys.CreateRequest{Name: "acme-key", Workspace: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := keys.Create(ctx, apikeys.CreateRequest{Name: "other-key", Workspace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	to := startFakeNode(t, DeriveKey(adminKey), nil)
	lost := to.record("a")
	lost.URL, lost.State, lost.HeartbeatAt = "https://127.0.0.1:1", store.NodeLost, time.Now().Add(-time.Hour).UTC()
	for _, n := range []*store.Node{lost, to.record("b")} {
		if err := db.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"mv1", "mv2"} {
		sb := storetest.Sample(id)
		sb.Workspace, sb.Node, sb.State, sb.Image, sb.Key = "acme", "a", store.Suspended, "images/"+id, ""
		if err := db.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		if err := db.SetImage(ctx, id, "a", "images/"+id); err != nil {
			t.Fatal(err)
		}
	}
	replica := startReplica(t, db)
	holder := func(id string) string {
		sb, err := db.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return sb.Node
	}

	tests := []struct {
		name, method, path string
		header             http.Header
		want               int
	}{
		{"no key", "POST", "/v1/sandboxes/mv1/exec", nil, http.StatusUnauthorized},
		{"a wrong key", "POST", "/v1/sandboxes/mv1/exec", http.Header{"Authorization": {"Bearer hutch_wrong"}}, http.StatusUnauthorized},
		{"a forged cluster key", "POST", "/v1/sandboxes/mv1/exec", http.Header{HeaderClusterKey: {DeriveKey("guess")}}, http.StatusUnauthorized},
		{"another workspace's key", "POST", "/v1/sandboxes/mv1/exec", http.Header{"Authorization": {"Bearer " + other}}, http.StatusNotFound},
		{"another workspace's key, E2B's header", "POST", "/e2b/sandboxes/mv1/resume", http.Header{"X-Api-Key": {other}}, http.StatusNotFound},
		{"another workspace's key, a WebSocket's", "GET", "/v1/sandboxes/mv1/pty", http.Header{
			"Upgrade": {"websocket"}, "Connection": {"Upgrade"}, "Sec-Websocket-Protocol": {"hutch.v1, hutch.bearer." + other},
		}, http.StatusNotFound},
		{"a preview with no key", "GET", "/v1/sandboxes/mv1/ports/8000/", nil, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, tt.method, replica.URL+tt.path, tt.header)
			if code != tt.want {
				t.Errorf("%s %s: %d %q, want %d", tt.method, tt.path, code, body, tt.want)
			}
			if got := holder("mv1"); got != "a" || to.calls != 0 {
				t.Errorf("the sandbox moved to %q, %d calls sent to the node; want it left on a and none", got, to.calls)
			}
		})
	}

	// Its workspace's key, and the daemon's own: moved.
	for id, key := range map[string]string{"mv1": acme, "mv2": adminKey} {
		code, body := call(t, "POST", replica.URL+"/v1/sandboxes/"+id+"/exec", http.Header{"Authorization": {"Bearer " + key}})
		if code != http.StatusOK || holder(id) != "b" {
			t.Errorf("a call with a key that sees %s: %d %q, on node %q; want it moved to b", id, code, body, holder(id))
		}
	}
}

// A node's internal route (a template's archive, which the nodes copy
// from each other) takes the cluster key and nothing else: not a
// tenant's key, not the daemon's own, not a guess. A replica never sends
// a caller there, however the path is spelled. A node copying a template
// sends no API key, and only over pinned TLS.
func TestAttackClusterInternalCallNeedsClusterKey(t *testing.T) {
	ctx := t.Context()
	ck := DeriveKey(adminKey)
	src := openTemplates(t)
	info := makeTemplate(t, src, "tpl")
	n := startFakeNode(t, ck, src)
	archive := "https://" + n.addr + "/cluster/v1/templates/tpl/archive?version=" + info.Version

	pinned := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: pinnedTLS(n.id.Fingerprint)}}
	fetch := func(header http.Header) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, archive, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		resp, err := pinned.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Trailer.Get("Hutch-Archive-Sha256") + string(body[:min(len(body), 200)])
	}
	tenant := "hutch_" + strings.Repeat("7", 64)
	for name, h := range map[string]http.Header{
		"no key":                              {},
		"a tenant's key":                      {"Authorization": {"Bearer " + tenant}},
		"the daemon's key":                    {"Authorization": {"Bearer " + adminKey}},
		"a guessed cluster key":               {HeaderClusterKey: {DeriveKey(tenant)}},
		"the daemon's key as the cluster key": {HeaderClusterKey: {adminKey}},
	} {
		if code, body := fetch(h); code != http.StatusUnauthorized {
			t.Errorf("an archive with %s: %d %q, want 401", name, code, body)
		}
	}
	if code, body := fetch(http.Header{HeaderClusterKey: {ck}}); code != http.StatusOK {
		t.Errorf("an archive with the cluster key: %d %q", code, body)
	}

	// Through a replica, which adds the cluster key to what it sends on:
	// never to an internal route.
	db := openStore(t)
	if err := db.PutNode(ctx, n.record("b")); err != nil {
		t.Fatal(err)
	}
	replica := startReplica(t, db)
	before := n.calls
	for _, path := range []string{"/cluster/v1/templates/tpl/archive", "/%63luster/v1/templates/tpl/archive", "/cluster", "//cluster/v1/templates/tpl/archive"} {
		for _, key := range []string{tenant, adminKey} {
			code, body := call(t, http.MethodGet, replica.URL+path, http.Header{"Authorization": {"Bearer " + key}})
			if code == http.StatusOK || n.calls != before {
				t.Errorf("GET %s through a replica: %d %q, %d calls sent on to the node; want it refused there", path, code, body, n.calls-before)
			}
		}
	}

	// A node copying it: over pinned TLS, the cluster key and no API key.
	dst := openTemplates(t)
	sync := &TemplateSync{Store: db, Local: dst, Node: "c", Nodes: NewNodeTransport(ck)}
	got, err := sync.fetch(ctx, n.record("b"), info)
	if err != nil || got.Version != info.Version {
		t.Fatalf("copy the template: %+v, %v", got, err)
	}
	last := n.wire[len(n.wire)-1]
	if last.Get("Authorization") != "" || last.Get(HeaderClusterKey) != ck {
		t.Errorf("a node copying a template sent %v: want the cluster key and no API key", last)
	}
}

func openTemplates(t *testing.T) *rootfs.Store {
	t.Helper()
	s, err := rootfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// makeTemplate makes template name in s, of one file.
func makeTemplate(t *testing.T, s *rootfs.Store, name string) rootfs.Info {
	t.Helper()
	b, err := s.Begin(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(b.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Root(), "hello"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := b.Commit(rootfs.Info{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}
