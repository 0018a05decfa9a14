// Package daemon is `hutch serve`: it wires config, store, templates,
// backends, the sandbox manager and the API together, serves until its
// context ends, and shuts down within a bounded time. Sandboxes outlive the
// daemon: the next start recovers them.
package daemon

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/agent/agentexe"
	"github.com/hutchdev/hutch/internal/core/checkpoints"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/desktop"
	"github.com/hutchdev/hutch/internal/core/events"
	"github.com/hutchdev/hutch/internal/core/lifecyclecmd"
	"github.com/hutchdev/hutch/internal/core/metrics"
	"github.com/hutchdev/hutch/internal/core/samples"
	"github.com/hutchdev/hutch/internal/core/webhooks"

	"golang.org/x/sync/errgroup"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/logring"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/base/telemetry"
	"github.com/hutchdev/hutch/internal/cluster"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/files"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/memory"
	"github.com/hutchdev/hutch/internal/core/move"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/core/secretenv"
	"github.com/hutchdev/hutch/internal/core/template"
	"github.com/hutchdev/hutch/internal/core/toolrun"
	"github.com/hutchdev/hutch/internal/core/volume"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/front/e2b"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/front/screenshot"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/disk"
	"github.com/hutchdev/hutch/internal/runtime/oci"
	"github.com/hutchdev/hutch/internal/runtime/procexit"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/trust/apikeys"
	"github.com/hutchdev/hutch/internal/trust/audit"
)

// readyDisks is how many disks of the default size are kept made ahead: a
// create takes one, and one more covers the next create while the first is
// remade (~25 ms).
const readyDisks = 2

// shutdownTimeout bounds how long in-flight requests may take to finish.
const shutdownTimeout = 10 * time.Second

// recentRecords is how many of its latest warnings and errors the daemon
// keeps for GET /v1/health: enough to see what went wrong lately, few
// enough to send on every call.
const recentRecords = 50

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config, version string, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	// Traces go out if the OTEL_* variables say where (docs/observability.md).
	traced, stopTracing, err := telemetry.Setup(ctx, "hutch", version)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			log.Warn("send the last traces", "error", err)
		}
	}()
	if traced {
		log.Info("tracing: spans go to the OTLP endpoint the OTEL_* variables name")
	}
	if cfg.Role == RoleAPI {
		return runAPI(ctx, cfg, version, log)
	}
	// The lock first: a daemon refused leaves nothing behind.
	// #nosec G301 -- searched by sandboxes' roots (see ensureDirs)
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Close() // releases it
	if err := cfg.ensureDirs(); err != nil {
		return fmt.Errorf("create data dirs: %w", err)
	}
	if err := claimRunDir(cfg.runDir(), cfg.DataDir); err != nil {
		return err
	}
	key, err := loadKey(cfg)
	if err != nil {
		return err
	}
	// A node's listeners are TLS, and answer the cluster's daemons only.
	node, err := trustOf(cfg, key)
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
	// Every secret value the daemon knows of is kept out of its logs and
	// answers from here on. The latest warnings and errors are kept for
	// the health route too, behind the redaction: what the ring keeps is
	// what the log shows.
	redactor := &redact.Redactor{}
	recent := logring.New(recentRecords)
	log = slog.New(redact.NewHandler(recent.Handler(log.Handler()), redactor))
	vault, secretSource, err := openVault(ctx, db, cfg.masterKey(), redactor, log)
	if err != nil {
		return err
	}
	swapper, trust, err := interceptor(filepath.Join(cfg.DataDir, "egress-ca"), cfg.EgressRootsFile, log)
	if err != nil {
		return err
	}
	secretHook := secretenv.New(secretenv.Config{Source: secretSource, Trust: trust})
	netCfg := cfg.networkConfig()
	netCfg.Store, netCfg.Interceptor, netCfg.Swaps, netCfg.Logger = db, swapper, secretHook.ForHost, log
	nets := network.New(netCfg)
	templateStore, err := rootfs.Open(cfg.templateDir())
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the agent: %w", err)
	}
	agentSrc, err := agentSource(exe, log)
	if err != nil {
		return err
	}
	agent, err := copyAgent(agentSrc, cfg.agentDir())
	_ = agentSrc.Close()
	if err != nil {
		return err
	}
	disks, err := disk.NewPool(cfg.diskDir(), create.DefaultDiskMB, readyDisks, log)
	if err != nil {
		return err
	}
	runc := oci.RuncConfig(cfg.Runc)
	runc.StateRoot = cfg.stateRoot("runc")
	gvisor := oci.GvisorConfig(besideExecutable(exe, cfg.Runsc))
	gvisor.StateRoot = cfg.stateRoot("runsc")
	// Sandboxes' processes that end by themselves are seen at once.
	exits := procexit.New(ctx, log)
	var backends []backend.Backend
	for _, c := range []oci.Config{runc, gvisor} {
		c.SandboxDir, c.Disks, c.AgentExe, c.Logger, c.Exits = cfg.sandboxDir(), disks, agent, log, exits
		c.NetnsDir = cfg.netnsDir(c.Name)
		backends = append(backends, oci.New(c))
	}
	unusable, pending := map[string]string{}, map[string]bool{}
	for _, be := range backends {
		switch h := be.Probe(ctx); {
		case h.Pending:
			unusable[h.Name], pending[h.Name] = h.Reason, true
			log.Info("backend not ready yet: used once it is", "backend", h.Name, "reason", h.Reason)
		case !h.Usable:
			unusable[h.Name] = h.Reason
			log.Warn("backend not usable: no sandbox is created with it", "backend", h.Name, "reason", h.Reason)
		}
	}
	def, why := defaultRuntime(cfg.Runtime, unusable, pending)
	log.Info("default runtime", "runtime", def, "reason", why)
	volumeDir := cfg.volumeDir()
	images, err := openImages(ctx, cfg)
	if err != nil {
		return err
	}
	if images != nil {
		defer func() { _ = images.Close() }() // nothing is written through it by now
	}
	if node != nil {
		// Before the core recovers the sandboxes of its name as its own.
		if err := cluster.Claim(ctx, db, cfg.nodeNameOf(), node.id.Fingerprint, cfg.NodeTimeout, time.Now().UTC()); err != nil {
			return err
		}
	}
	quotas := quota.New(quota.Config{Store: db, Node: cfg.nodeNameOf(), Logger: log})
	procs := processes.New(db, log)
	steps := metrics.NewSteps()
	sampler := samples.New(samples.Config{Interval: cfg.SampleInterval, Network: nets.Counters, Logger: log})
	eventLog := events.New(events.Config{Store: db, Node: cfg.nodeNameOf(), Notice: cfg.EvictionNotice, Logger: log})
	hooks := []hook.Hook{quotas, secretHook, nets, procs, lifecyclecmd.New(db, log), &volume.Mounts{Store: db, Dir: volumeDir}, memory.New(log), steps, sampler, eventLog}
	if images != nil {
		hooks = append(hooks, move.New(move.Config{Store: db, Images: images, Node: cfg.nodeNameOf(), Backends: backends, Logger: log}))
	}
	mgr, err := core.New(ctx, core.Config{
		Store: db, Backends: backends, Default: def, DefaultReason: why, Unusable: unusable, Pending: pending,
		Templates: templateStore, Logger: log, Pools: cfg.poolSpecs(),
		Node: cfg.nodeNameOf(), Hooks: hooks,
	})
	if err != nil {
		return err
	}
	if cfg.ToolsHostDir != "" {
		log.Warn("tool calls may run on the host, outside any sandbox, in modes selective and off: trusted local development only",
			"tools_host_dir", cfg.ToolsHostDir, "tools_mode", cmp.Or(cfg.ToolsMode, "all"))
	}
	execs := exec.New(mgr, procs, db, log)
	execs.OnEvent(eventLog.Emit)
	execs.OnStep(steps)
	desktops := desktop.New(mgr, execs, log)
	checkpointService := checkpoints.New(checkpoints.Config{Core: mgr, Store: db, Templates: templateStore, Logger: log})
	tools := toolrun.New(toolrun.Config{
		Sandboxes: mgr, Networks: nets, Downloads: download.NewSigner(key), PublicURL: cfg.publicURL(),
		Mode: cfg.ToolsMode, HostDir: cfg.ToolsHostDir, HostUser: cfg.ToolsHostUser, Checkpoints: checkpointService, Desktops: desktops, Logger: log,
	})
	defer mgr.Close()
	// Template build steps run in sandboxes of their own, made with runc
	// directly (see internal/core/template/build.go), not the core's.
	var buildBackend backend.Backend
	for _, be := range backends {
		if be.Name() == template.BuildRuntime {
			buildBackend = be
		}
	}
	var withdraw func(context.Context, string) error // a node's deletes leave the cluster
	if cfg.Role == RoleNode {
		withdraw = db.UnpublishTemplate
	}
	templateService := template.New(template.Config{
		Core: mgr, Store: db, Templates: templateStore, BuildBackend: buildBackend, BuildUnusable: unusable[template.BuildRuntime],
		PackageCache: cfg.packageCache(), Withdraw: withdraw, Quotas: quotas, Processes: procs, Observer: steps, Logger: log,
	})
	daemonMetrics := metrics.New(metrics.Config{Steps: steps, Version: version, State: metrics.State{
		Sandboxes: mgr.List, Node: cfg.nodeNameOf(), Pools: poolsOf(mgr), Workspaces: quotas.Workspaces, Egress: nets.Totals, Nodes: db.ListNodes, Logger: log,
	}})

	// Webhooks are reached as the sandboxes' egress is, under mode full.
	hooksOut, err := webhooks.New(webhooks.Config{Store: db, Key: key, Dial: netCfg.Dial, Lookup: netCfg.Lookup, Version: version, Logger: log})
	if err != nil {
		return err
	}
	eventLog.Subscribe(hooksOut.Take)

	auditLog := audit.New(db, log)
	defer auditLog.Close() // before the database's: what is queued is written
	previews := preview.New(preview.Config{Acquire: preview.Core(mgr), Domain: cfg.PreviewDomain, Starting: execs.PortStarting, Logger: log})
	// E2B's sandbox front listens first: the API tells its address, the
	// one bound (a daemon on another data dir than the default gets a
	// free port).
	var e2bLn net.Listener
	e2bInfo := client.E2BInfo{APIURL: cfg.publicURL() + e2bPrefix}
	if addr := cfg.e2bListen(); addr != "" {
		if e2bLn, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("listen on %s (--e2b-listen): %w", addr, err)
		}
		defer e2bLn.Close()
		if node != nil && cfg.E2BTLSCert != "" {
			return fmt.Errorf("--e2b-tls-cert: a node's front speaks the cluster's TLS; give the certificate to the API replicas' load balancer")
		}
		if e2bLn, err = cfg.e2bTLS(e2bLn); err != nil {
			return err
		}
		e2bLn = node.listen(e2bLn)
		_, port, _ := net.SplitHostPort(e2bLn.Addr().String())
		e2bInfo.SandboxURL, e2bInfo.Domain = "http://"+e2bLn.Addr().String(), "localhost:"+port
	}
	keys := apikeys.New(db, log)
	if names, err := keys.InAdminWorkspace(ctx); err != nil {
		return err
	} else if len(names) > 0 {
		log.Warn("API keys act in the administrator's workspace and reach its sandboxes, volumes and secrets: delete them and make them again with --workspace", "keys", names)
	}
	rep := reporter(cfg, db, mgr, templateStore, version)
	srv := api.New(api.Config{E2B: e2bInfo, Nodes: nodesOf(cfg, db, rep), Manager: mgr, Exec: execs, Files: files.New(mgr), Tools: tools, Templates: templateService, Checkpoints: checkpointService, Desktops: desktops, Volumes: volume.New(db, mgr, volumeDir, log), Keys: keys, Audit: auditLog, Workspaces: quotas, Networks: nets, Secrets: vault, Redactor: redactor, Previews: previews, PreviewLinks: download.NewSignerFor(key, "preview links"), Screenshots: screenshot.New(mgr, execs, previews, log), PublicURL: cfg.publicURL(), APIKey: key, Version: version, Logger: log,
		DataDir: cfg.DataDir, RecentLog: recent, Metrics: daemonMetrics, Samples: sampler, Events: eventLog, Webhooks: hooksOut, Defaults: client.Defaults{NetworkMode: cfg.NetworkDefault, ToolsMode: cfg.ToolsMode},
		Limits: api.Limits{Rate: cfg.RateLimit, Burst: cfg.RateBurst, Streams: cfg.MaxStreams}})
	tcp, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	tcp = node.listen(tcp)
	unixLn, err := listenUnix(cfg.socketPath())
	if err != nil {
		tcp.Close()
		return err
	}
	// E2B's control plane is a dialect of the API: it calls the API as
	// its callers' keys (internal/front/e2b).
	controlPlane := e2b.NewControlPlane(e2b.ControlPlaneConfig{API: srv.Handler(true), DaemonKey: key, Keys: keys, Domain: e2bInfo.Domain, Logger: log})
	server := func(h http.Handler) *http.Server { return httpServer(h, log) }
	membership, err := member(cfg, db, rep, e2bLn, node, log)
	if err != nil {
		return err
	}
	servers := []*http.Server{server(node.guard(withE2B(srv.Handler(true), controlPlane), templateStore, log)), server(withProfiles(srv.Handler(false)))}
	listeners := []net.Listener{tcp, unixLn}
	if e2bLn != nil {
		// The front's calls are limited per key as the API's are (0: the
		// API's defaults; a negative rate: none), and audited as the API's.
		frontRate, frontBurst := cfg.RateLimit, cfg.RateBurst
		if frontRate == 0 {
			frontRate = api.DefaultLimits.Rate
		}
		if frontBurst == 0 {
			frontBurst = api.DefaultLimits.Burst
		}
		front := e2b.NewFront(e2b.FrontConfig{
			Manager: mgr, Previews: previews, Interpreter: e2b.NewInterpreter(execs, redactor, log),
			Redactor: redactor, DaemonKey: key, Keys: keys, Audit: auditLog, Rate: frontRate, Burst: frontBurst,
			Domain: e2bInfo.Domain, Logger: log,
		})
		servers = append(servers, server(node.guard(front, nil, log)))
		listeners = append(listeners, e2bLn)
	}
	if cfg.MetricsListen != "" {
		// Prometheus's scrapes, not the cluster's: plain HTTP, the
		// administrator's key (see docs/observability.md).
		metricsLn, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("listen on %s (--metrics-listen): %w", cfg.MetricsListen, err)
		}
		defer metricsLn.Close()
		servers = append(servers, server(srv.MetricsHandler()))
		listeners = append(listeners, metricsLn)
	}
	log.Info("hutch serving", "listen", tcp.Addr().String(), "e2b_sandbox_url", e2bInfo.SandboxURL, "socket", cfg.socketPath(), "data_dir", cfg.DataDir)

	g, gctx := errgroup.WithContext(ctx)
	for i, s := range servers {
		g.Go(func() error {
			if err := s.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	g.Go(func() error { return mgr.Run(gctx) })
	g.Go(func() error { return sampler.Run(gctx) })
	g.Go(func() error { return eventLog.Run(gctx) })
	g.Go(func() error { return hooksOut.Run(gctx) })
	if membership != nil {
		g.Go(func() error { return cluster.Beat(gctx, *membership) })
		g.Go(func() error { return templateSync(membership, db, templateStore, node, log).Run(gctx) })
		g.Go(func() error { return cluster.Watch(gctx, db, cfg.NodeTimeout, eventLog.Emit, log) })
	}
	g.Go(func() error { return disks.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), shutdownTimeout)
		defer cancel()
		var errs []error
		for _, s := range servers {
			if err := s.Shutdown(sctx); err != nil {
				s.Close() // streams still open after the grace period
				errs = append(errs, err)
			}
		}
		_ = os.Remove(cfg.socketPath()) // the next start replaces a stale one anyway
		if len(errs) > 0 {
			log.Warn("forced shutdown after timeout", "error", errors.Join(errs...))
		}
		return nil
	})
	return g.Wait()
}

// poolsOf reads the warm pools of mgr for the metrics.
func poolsOf(mgr *core.Manager) func(ctx context.Context) []metrics.Pool {
	return func(ctx context.Context) []metrics.Pool {
		var out []metrics.Pool
		for _, p := range mgr.Health(ctx).Pools {
			out = append(out, metrics.Pool{Template: p.Template, Runtime: p.Runtime, Size: p.Size, Ready: p.Ready})
		}
		return out
	}
}

// e2bPrefix is where E2B's control plane is served on the API's listener
// (E2B_API_URL keeps a path).
const e2bPrefix = "/e2b"

// withE2B serves E2B's control plane under e2bPrefix, and api elsewhere.
func withE2B(api, controlPlane http.Handler) http.Handler {
	cp := http.StripPrefix(e2bPrefix, controlPlane)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, e2bPrefix+"/") {
			cp.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// listenUnix listens on a unix socket only root can use, replacing a stale
// socket file.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// loadOrCreateKey returns the API key, making one on first start.
func loadOrCreateKey(path string) (string, error) {
	// #nosec G304 -- the key file's path comes from the daemon's configuration
	b, err := os.ReadFile(path)
	if err == nil {
		if key := strings.TrimSpace(string(b)); key != "" {
			return key, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read API key: %w", err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	key := "hutch_" + hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write API key: %w", err)
	}
	return key, nil
}

// defaultRuntime picks the backend creates get when they name none: the
// configured one, else gvisor, the stronger boundary, when it is usable or
// being set up (creates wait for it rather than get a weaker one), else
// runc. It says why.
func defaultRuntime(configured string, unusable map[string]string, pending map[string]bool) (name, reason string) {
	switch {
	case configured != "":
		return configured, "set by the configuration"
	case unusable["gvisor"] == "":
		return "gvisor", "gvisor is usable, and the stronger boundary"
	case pending["gvisor"]:
		return "gvisor", "gvisor is the stronger boundary, and was being set up when the daemon started (creates wait for it)"
	default:
		return "runc", "gvisor is not usable: " + unusable["gvisor"]
	}
}

// agentSource opens the executable every sandbox runs as its agent: the
// agent's own, embedded by make build (see package agentexe), or else the
// daemon's executable, which answers `hutch agent` too.
func agentSource(exe string, log *slog.Logger) (io.ReadCloser, error) {
	if b := agentexe.Executable(); b != nil {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	log.Warn("sandboxes run the whole hutch binary as their agent, which starts slower: make build embeds the agent's own")
	f, err := os.Open(exe) // #nosec G304 -- the daemon's own executable
	if err != nil {
		return nil, fmt.Errorf("open own executable for the agent: %w", err)
	}
	return f, nil
}

// copyAgent writes the agent's executable into dir and returns its path.
// runc binds it from inside a sandbox's user namespace, as a stranger, so
// it must be where anyone may search, which the executable's own place (a
// checkout under /root, say) need not be. A fresh copy at each start,
// renamed into place: sandboxes already running keep the one they have.
func copyAgent(src io.Reader, dir string) (path string, err error) {
	tmp, err := os.CreateTemp(dir, ".hutch-")
	if err != nil {
		return "", fmt.Errorf("copy the agent: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755) // #nosec G302 -- an executable, run in every sandbox
	}
	path = filepath.Join(dir, "hutch")
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("copy the agent: %w", err)
	}
	return path, nil
}

// besideExecutable resolves a runtime binary given by bare name: the file of
// that name beside the hutch executable when there is one, or when one is
// being built there (make runsc puts runsc in bin/, beside bin/hutch, and
// marks it building meanwhile), else the name, for a PATH lookup.
func besideExecutable(exe, name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	beside := filepath.Join(filepath.Dir(exe), name)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return beside
	}
	if _, err := os.Stat(beside + oci.BuildingSuffix); err == nil {
		return beside
	}
	return name
}

// withProfiles serves Go's profiles (net/http/pprof) under /debug/pprof/
// beside h: only on the root-only unix socket, for an operator who wants
// to see where the daemon's time goes (curl --unix-socket
// /run/hutch/hutch.sock http://hutch/debug/pprof/profile?seconds=30).
func withProfiles(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
