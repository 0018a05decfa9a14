package cli

import (
	"context"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hutchdev/hutch/internal/app/daemon"
	"github.com/hutchdev/hutch/internal/base/timerslack"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

// Version is the build's version, set by the Makefile's -ldflags.
var Version = "dev"

func newServeCmd() *cobra.Command { return serveCmd(serveDaemon) }

// serveDaemon runs the daemon with its timer slack (see timerslack), which
// the runtime and the agents it starts inherit.
func serveDaemon(ctx context.Context, cfg daemon.Config, version string, log *slog.Logger) error {
	if err := timerslack.SetProcess(timerslack.Daemon); err != nil {
		log.Info("the daemon keeps the kernel's timer slack", "error", err)
	}
	return daemon.Run(ctx, cfg, version, log)
}

// serveCmd is hutch serve, handing the configuration it reads to run: the
// daemon's, or a test's.
func serveCmd(run func(ctx context.Context, cfg daemon.Config, version string, log *slog.Logger) error) *cobra.Command {
	cfg := daemon.Default()
	var (
		configFile string
		pools      []string
		// e2bListen is --e2b-listen, kept apart from cfg: unset is not
		// "" (none) but the address derived from the data dir.
		e2bListen string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Hutch daemon (needs root)",
		Long: "Run the Hutch daemon: the REST API on --listen (bearer key required) and on a\n" +
			"root-only unix socket in --run-dir, state and sandboxes in --data-dir.\n" +
			"Sandboxes keep running when the daemon stops; the next start picks them up.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				// Defaults, then the file, then the flags that were given.
				fileCfg := daemon.Default()
				if err := fileCfg.LoadFile(configFile); err != nil {
					return err
				}
				fields := map[string]*string{
					"listen": &fileCfg.Listen, "metrics-listen": &fileCfg.MetricsListen, "public-url": &fileCfg.PublicURL, "preview-domain": &fileCfg.PreviewDomain, "tools-mode": &fileCfg.ToolsMode, "tools-host-dir": &fileCfg.ToolsHostDir, "tools-host-user": &fileCfg.ToolsHostUser, "data-dir": &fileCfg.DataDir, "store": &fileCfg.Store, "run-dir": &fileCfg.RunDir,
					"runc": &fileCfg.Runc, "runsc": &fileCfg.Runsc, "runtime": &fileCfg.Runtime,
					"log-level": &fileCfg.LogLevel, "package-cache": &fileCfg.PackageCache,
					"network-default": &fileCfg.NetworkDefault, "network-netns": &fileCfg.NetworkNetns, "network-dns": &fileCfg.NetworkDNS,
					"role": &fileCfg.Role, "node-name": &fileCfg.NodeName, "advertise": &fileCfg.Advertise, "api-key-file": &fileCfg.APIKeyFile, "image-store": &fileCfg.ImageStore,
					"e2b-tls-cert": &fileCfg.E2BTLSCert, "e2b-tls-key": &fileCfg.E2BTLSKey,
				}
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if p, ok := fields[f.Name]; ok {
						*p = f.Value.String()
					}
				})
				if cmd.Flags().Changed("rate-limit") {
					fileCfg.RateLimit = cfg.RateLimit
				}
				if cmd.Flags().Changed("rate-burst") {
					fileCfg.RateBurst = cfg.RateBurst
				}
				if cmd.Flags().Changed("max-streams") {
					fileCfg.MaxStreams = cfg.MaxStreams
				}
				fileCfg.Heartbeat, fileCfg.NodeTimeout, fileCfg.SampleInterval, fileCfg.EvictionNotice = cfg.Heartbeat, cfg.NodeTimeout, cfg.SampleInterval, cfg.EvictionNotice
				cfg = fileCfg
			}
			if cmd.Flags().Changed("e2b-listen") {
				cfg.E2BListen = &e2bListen
			}
			if cmd.Flags().Changed("pool") {
				cfg.Pools = nil
				for _, s := range pools {
					p, err := daemon.ParsePool(s)
					if err != nil {
						return usageErrorf(cmd, "--pool: %v", err)
					}
					cfg.Pools = append(cfg.Pools, p)
				}
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
				return usageErrorf(cmd, "--log-level: %v", err)
			}
			cfg.MasterKey = os.Getenv(secrets.EnvVar)
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return run(cmd.Context(), cfg, Version, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "TOML config file (version = 1); flags override it")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "TCP address of the REST API")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "", "serve GET /metrics (Prometheus) alone on TCP address `ADDR` too, behind the administrator's key as on --listen (default: --listen only)")
	f.StringVar(&cfg.PublicURL, "public-url", "", "how callers reach the API, for the download URLs it makes (default: http:// and --listen)")
	f.StringVar(&cfg.PreviewDomain, "preview-domain", cfg.PreviewDomain, "serve a sandbox's port at {port}-{sandbox}.DOMAIN on --listen too (browsers resolve *.localhost themselves; another domain needs a wildcard DNS record); \"\": path routing only")
	f.StringVar(&e2bListen, "e2b-listen", "", "serve E2B's sandbox front (E2B_SANDBOX_URL) on TCP address `ADDR`; E2B's control plane is on --listen under /e2b, and hutch e2b env prints both (default: 127.0.0.1:49983 for the default --data-dir, else a free port on 127.0.0.1); \"\": none")
	f.StringVar(&cfg.E2BTLSCert, "e2b-tls-cert", "", "answer TLS on the E2B front's port too, with this PEM certificate (a wildcard for the E2B domain's hosts, as *.localhost), for the https URLs E2B's SDKs make (the Desktop SDK's stream URL); plain HTTP goes on")
	f.StringVar(&cfg.E2BTLSKey, "e2b-tls-key", "", "the private key (PEM) of --e2b-tls-cert")
	f.StringVar(&cfg.ToolsHostDir, "tools-host-dir", "", "let tool calls run on the host, in this directory, in sandbox modes selective and off: trusted local development only (default: refused)")
	f.StringVar(&cfg.ToolsHostUser, "tools-host-user", "", "the user (name, uid or uid:gid) tool calls on the host run as, never root (default: the owner of --tools-host-dir)")
	f.StringVar(&cfg.ToolsMode, "tools-mode", "", "sandbox mode of tool calls that name none: all (the default), selective or off")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "where state, the API key and sandboxes live")
	f.StringVar(&cfg.Store, "store", cfg.Store, "keep the state in this PostgreSQL database (postgres://user@host/db; the password from $PGPASSWORD or ~/.pgpass) (default: SQLite in --data-dir)")
	f.StringVar(&cfg.RunDir, "run-dir", cfg.RunDir, "where the unix socket and runtime state live, one per data dir (default: /run/hutch for the default --data-dir, else one named after it)")
	f.StringVar(&cfg.Runc, "runc", cfg.Runc, "the runc binary")
	f.StringVar(&cfg.Runsc, "runsc", cfg.Runsc, "gVisor's runsc binary (by name: beside hutch, then in PATH)")
	f.StringVar(&cfg.Runtime, "runtime", cfg.Runtime, "runtime of sandboxes that name none: runc or gvisor (default: gvisor when usable)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	f.StringArrayVar(&pools, "pool", nil, "keep `TEMPLATE[@RUNTIME]=SIZE` sandboxes ready (a warm pool); repeatable (default: base=2; base=0: none)")
	f.StringVar(&cfg.SecretsKeyFile, "secrets-key-file", cfg.SecretsKeyFile, "the master key that encrypts secrets, a 0600 file of 32 bytes in base64 (default: secrets.key in --data-dir, made on first start; $"+secrets.EnvVar+" wins over it)")
	f.StringVar(&cfg.EgressRootsFile, "egress-roots", cfg.EgressRootsFile, "a PEM file of more roots to trust, besides the system's, when the daemon connects to a proxy-injected secret's host")
	f.StringVar(&cfg.PackageCache, "package-cache", cfg.PackageCache, "where template builds keep downloaded Debian packages (default: cache/debs in --data-dir)")
	f.StringVar(&cfg.NetworkDefault, "network-default", cfg.NetworkDefault, "network mode of sandboxes created without a policy: none, allowlist or full")
	f.StringVar(&cfg.NetworkNetns, "network-netns", "", "network namespace (a path) to connect from for sandboxes (default: the daemon's own)")
	f.StringVar(&cfg.NetworkDNS, "network-dns", "", "DNS server (host:port) resolving sandboxes' names (default: the one in /etc/resolv.conf)")
	f.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests a second each API key may make on average (default 1000; negative: no limit)")
	f.IntVar(&cfg.RateBurst, "rate-burst", 0, "requests each API key may make at once above its rate (default 2000)")
	f.IntVar(&cfg.MaxStreams, "max-streams", 0, "event streams and WebSockets each API key may hold open (default 256; negative: no limit)")
	f.StringVar(&cfg.Role, "role", cfg.Role, "all: a single box; node: run sandboxes on this host for the API replicas; api: serve the API and send each call to the node holding its sandbox (node and api share --store and --api-key-file)")
	f.StringVar(&cfg.NodeName, "node-name", "", "this node's name among the others (default: the host's name)")
	f.StringVar(&cfg.Advertise, "advertise", "", "the URL API replicas reach this node's API on, over TLS pinned to the certificate it publishes in the store (default: https:// and --listen)")
	f.StringVar(&cfg.APIKeyFile, "api-key-file", "", "a file holding the API key, the same for every node and replica (default: api.key in --data-dir, made on first start)")
	f.StringVar(&cfg.ImageStore, "image-store", "", "where suspended sandboxes' images go so that another node can resume them: a directory every node mounts, or s3://bucket/prefix?endpoint=URL (keys from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY) (default: none)")
	f.DurationVar(&cfg.EvictionNotice, "eviction-notice", 0, "how long before its max lifetime ends a sandbox gets its sandbox.eviction_notice event (default 5m)")
	f.DurationVar(&cfg.SampleInterval, "sample-interval", 0, "how often each running sandbox's CPU, memory, disk and network are sampled for GET /v1/sandboxes/{id}/metrics (default 5s)")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", 0, "how often a node tells the others it is up (default 5s)")
	f.DurationVar(&cfg.NodeTimeout, "node-timeout", 0, "how long a node may be silent before it is marked lost and its running sandboxes error (default 15s)")
	return cmd
}
