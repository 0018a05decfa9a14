package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hutchdev/hutch/internal/cluster"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/storage/imagestore"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
)

// runAPI serves as an API replica (--role api): no sandboxes, no data
// dir; every call goes on to a node (internal/cluster) over TLS pinned
// to the node's certificate, with the cluster key, and the replica
// watches the nodes' heartbeats with them.
func runAPI(ctx context.Context, cfg Config, version string, log *slog.Logger) error {
	key, err := loadKey(cfg)
	if err != nil {
		return err
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			log.Error("close database", "error", err)
		}
	}()
	tcp, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	nodes := cluster.NewNodeTransport(cluster.DeriveKey(key))
	keys := apikeys.New(db, log)
	router := cluster.NewRouter(cluster.RouterConfig{
		Store: db, Nodes: nodes, AdminKey: key, Keys: keys, PreviewDomain: cfg.PreviewDomain, Timeout: cfg.NodeTimeout, Logger: log,
		Self: "http://" + reachable(tcp.Addr(), "127.0.0.1"), Version: version,
	})
	servers, listeners := []*http.Server{httpServer(router, log)}, []net.Listener{tcp}
	// E2B's sandbox front, routed to the nodes' fronts.
	e2bAddr := ""
	if addr := cfg.e2bListen(); addr != "" {
		e2bLn, err := net.Listen("tcp", addr)
		if err != nil {
			tcp.Close()
			return fmt.Errorf("listen on %s (--e2b-listen): %w", addr, err)
		}
		front := cluster.NewE2BRouter(cluster.RouterConfig{Store: db, Nodes: nodes, AdminKey: key, Keys: keys, Timeout: cfg.NodeTimeout, Logger: log})
		servers, listeners = append(servers, httpServer(front, log)), append(listeners, e2bLn)
		e2bAddr = e2bLn.Addr().String()
	}
	log.Info("hutch serving as an API replica", "listen", tcp.Addr().String(), "e2b_listen", e2bAddr)
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range servers {
		g.Go(func() error {
			if err := s.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	// A replica posts no webhooks: the events of the sandboxes a lost node
	// took into error are written for GET /v1/events alone.
	record := func(ev *store.Event) {
		if err := db.AppendEvents(gctx, ev); err != nil {
			log.Warn("record an event", "type", ev.Type, "error", err)
		}
	}
	g.Go(func() error { return cluster.Watch(gctx, db, cfg.NodeTimeout, record, log) })
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), shutdownTimeout)
		defer cancel()
		for _, s := range servers {
			if err := s.Shutdown(sctx); err != nil {
				s.Close()
			}
		}
		return nil
	})
	return g.Wait()
}

// httpServer serves h as every listener of the daemon's does. A client
// that sends its header slowly, or keeps an idle connection, holds it for
// a bounded time; bodies are bounded in pace by the API itself
// (internal/front/api's limits.go).
func httpServer(h http.Handler, log *slog.Logger) *http.Server {
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	// Every listener decides on one spelling of each path.
	return &http.Server{Handler: api.CanonicalPaths(h), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: api.MaxHeaderBytes, ErrorLog: errorLog}
}

// nodeTrust is a node's side of the cluster's trust (internal/cluster's
// tls.go and key.go): its certificate, which its listeners serve, and the
// cluster key, which it asks of every call and sends on its own. nil for
// the other roles, whose listeners stay as a single box's; its methods
// then leave what they are given as it is.
type nodeTrust struct {
	id    cluster.Identity
	key   string
	nodes *cluster.NodeTransport
}

// trustOf is cfg's nodeTrust, for a node whose daemon key is apiKey.
func trustOf(cfg Config, apiKey string) (*nodeTrust, error) {
	if cfg.Role != RoleNode {
		return nil, nil
	}
	id, err := cluster.LoadIdentity(filepath.Join(cfg.DataDir, "cluster-tls.pem"))
	if err != nil {
		return nil, fmt.Errorf("the node's TLS certificate: %w", err)
	}
	key := cluster.DeriveKey(apiKey)
	return &nodeTrust{id: id, key: key, nodes: cluster.NewNodeTransport(key)}, nil
}

// listen serves ln over TLS with the node's certificate: plain HTTP is
// refused (400).
func (t *nodeTrust) listen(ln net.Listener) net.Listener {
	if t == nil || ln == nil {
		return ln
	}
	return t.id.Listen(ln)
}

// guard puts h behind the cluster key; templates are served to the other
// nodes (nil: none, as on the E2B front).
func (t *nodeTrust) guard(h http.Handler, templates *rootfs.Store, log *slog.Logger) http.Handler {
	if t == nil {
		return h
	}
	g := &cluster.NodeGuard{Key: t.key, Templates: templates, Log: log}
	return g.Wrap(h)
}

// reporter tells what this daemon has: each heartbeat of a node's, and
// a single box's GET /v1/nodes.
func reporter(cfg Config, db database, mgr *core.Manager, templates *rootfs.Store, version string) cluster.Reporter {
	return cluster.Reporter{Store: db, Node: cfg.nodeNameOf(), Health: mgr.Health, Templates: templates, Version: version}
}

// nodesOf is what GET /v1/nodes tells: on a node, every node's record in
// the store; on a single box, which has none, the box itself, from rep,
// started now.
func nodesOf(cfg Config, db database, rep cluster.Reporter) api.Nodes {
	if cfg.Role == RoleNode {
		return cluster.Members{Store: db, Timeout: cfg.NodeTimeout}
	}
	name, err := cfg.nodeName()
	if err != nil || name == "" {
		name = "localhost"
	}
	return cluster.Single{ID: name, URL: cfg.publicURL(), StartedAt: time.Now().UTC(), Report: rep.Report}
}

// member is a node's membership (--role node): nil for the other roles.
// e2b is its E2B front's listener, nil when it has none.
func member(cfg Config, db database, rep cluster.Reporter, e2b net.Listener, trust *nodeTrust, log *slog.Logger) (*cluster.Member, error) {
	if cfg.Role != RoleNode {
		return nil, nil
	}
	name, err := cfg.nodeName()
	if err != nil {
		return nil, fmt.Errorf("name this node: %w", err)
	}
	url, err := cfg.advertise()
	if err != nil {
		return nil, err
	}
	e2bURL := ""
	if e2b != nil {
		u, err := neturl.Parse(url)
		if err != nil {
			return nil, err
		}
		e2bURL = "https://" + reachable(e2b.Addr(), u.Hostname())
	}
	report := func(ctx context.Context) (store.NodeReport, error) {
		r, err := rep.Report(ctx)
		r.E2BURL = e2bURL
		return r, err
	}
	return &cluster.Member{Store: db, ID: name, URL: url, Fingerprint: trust.id.Fingerprint, Report: report, Every: cfg.Heartbeat, Log: log}, nil
}

// reachable is the address listener addr is reached on: its own, or
// host's (the loopback, for the process itself; the advertised host, for
// others) when it listens on every address.
func reachable(addr net.Addr, host string) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

// templateSync keeps a node's templates the other nodes' (see
// internal/cluster/templates.go).
func templateSync(m *cluster.Member, db database, local *rootfs.Store, trust *nodeTrust, log *slog.Logger) *cluster.TemplateSync {
	return &cluster.TemplateSync{
		Store: db, Local: local, Node: m.ID, Nodes: trust.nodes, Every: m.Every, Log: log,
		InUse: func(ctx context.Context, name string) (bool, error) {
			list, err := db.ListSandboxes(ctx)
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(list, func(sb *store.Sandbox) bool { return sb.Node == m.ID && sb.Template == name }), nil
		},
	}
}

// openImages opens the image store cfg names; nil when it names none.
func openImages(ctx context.Context, cfg Config) (imagestore.Store, error) {
	if cfg.ImageStore == "" {
		return nil, nil
	}
	s, err := imagestore.Open(ctx, cfg.ImageStore)
	if err != nil {
		return nil, fmt.Errorf("image store (--image-store): %w", err)
	}
	return s, nil
}

// loadKey returns the API key cfg names: a shared file's (api_key_file),
// which must hold one, or the data dir's, made on first start.
func loadKey(cfg Config) (string, error) {
	if cfg.APIKeyFile == "" {
		return loadOrCreateKey(cfg.keyPath())
	}
	// #nosec G304 -- the key file's path comes from the daemon's configuration
	b, err := os.ReadFile(cfg.APIKeyFile)
	if err != nil {
		return "", fmt.Errorf("read the API key (api_key_file): %w", err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 16 {
		return "", fmt.Errorf("the API key in %s is %d characters: give one of 16 or more, the same to every node and replica", cfg.APIKeyFile, len(key))
	}
	return key, nil
}
