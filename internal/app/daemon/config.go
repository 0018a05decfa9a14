package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/tlssniff"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/toolrun"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store/postgres"
	"github.com/hutchdev/hutch/internal/trust/secrets"
)

// Config is the daemon's configuration: defaults, then the TOML file, then
// flags.
type Config struct {
	// Version must be 1.
	Version int `toml:"version"`
	// Listen is the TCP address of the REST API.
	Listen string `toml:"listen"`
	// PublicURL is how callers reach the API, for the download URLs it
	// makes (default: http:// and Listen).
	PublicURL string `toml:"public_url"`
	// PreviewDomain is host routing's domain: a sandbox's port is served
	// at {port}-{sandbox}.{PreviewDomain} on Listen (internal/front/preview).
	// The default, localhost, browsers resolve to the loopback by
	// themselves; another needs a wildcard DNS record pointing at the
	// daemon. Empty: path routing only.
	PreviewDomain string `toml:"preview_domain"`
	// E2BListen is the TCP address of the E2B sandbox front
	// (E2B_SANDBOX_URL; internal/front/e2b); E2B's control plane is served on
	// Listen under /e2b. Empty: no front. Unset (nil): the one derived
	// from DataDir (see e2bListen), as the run dir is.
	E2BListen *string `toml:"e2b_listen"`
	// E2BTLSCert and E2BTLSKey, when set, are a certificate (PEM, a
	// wildcard for the E2B domain's hosts) and its key with which the
	// front answers TLS on its port too, beside plain HTTP: E2B's SDKs
	// make https URLs of getHost (the Desktop SDK's stream URL).
	E2BTLSCert string `toml:"e2b_tls_cert"`
	E2BTLSKey  string `toml:"e2b_tls_key"`
	// MetricsListen is a TCP address that serves GET /metrics alone,
	// behind the administrator's key as on Listen (where it is served
	// too). Empty: none.
	MetricsListen string `toml:"metrics_listen"`
	// ToolsMode is the sandbox mode of tool calls that name none: all
	// (the default), selective or off. ToolsHostDir is where calls run on
	// the host in the last two, which are refused without it: trusted
	// local development only. ToolsHostUser is who they run as there (a
	// user name, uid or uid:gid; empty: ToolsHostDir's owner), never root
	// (toolrun.ResolveHostUser); their file tools reach nothing out of
	// ToolsHostDir.
	ToolsMode     string `toml:"tools_mode"`
	ToolsHostDir  string `toml:"tools_host_dir"`
	ToolsHostUser string `toml:"tools_host_user"`
	// DataDir holds the database, the API key, templates and sandboxes.
	DataDir string `toml:"data_dir"`
	// Store is where the state is kept: empty for SQLite in DataDir
	// (hutch.db), or the URL of a PostgreSQL database (postgres://…),
	// which several daemons may share. Its password may be left out of
	// the URL for PGPASSWORD or ~/.pgpass, which are read as libpq reads
	// them.
	Store string `toml:"store"`
	// RunDir holds the unix socket and the runtimes' state. It belongs to
	// one data dir (see lock.go); empty means the one derived from DataDir:
	// /run/hutch for the default data dir.
	RunDir string `toml:"run_dir"`
	// Runc is the runc binary, a path or a name looked up in PATH.
	Runc string `toml:"runc"`
	// Runsc is gVisor's runsc binary, a path or a name looked up beside the
	// hutch executable (where make runsc puts it), then in PATH.
	Runsc string `toml:"runsc"`
	// Runtime is the backend a create that names none gets: runc or gvisor.
	// Empty means gvisor when it is usable, else runc.
	Runtime string `toml:"runtime"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// PackageCache keeps the Debian packages template builds download, for
	// the next build. Empty means cache/debs in DataDir. On another file
	// system than DataDir, packages are downloaded every time.
	PackageCache string `toml:"package_cache"`
	// Pools are the warm pools: sandboxes of a template made ahead of
	// time, so that creating one is handing it over. Default: two of base
	// on the default runtime (none while base is not built).
	Pools []Pool `toml:"pool"`
	// NetworkDefault is the network mode of a sandbox created without a
	// policy: none, allowlist (with no rules: nothing) or full.
	NetworkDefault string `toml:"network_default"`
	// NetworkNetns is the network namespace (a path, as /run/netns/NAME)
	// the daemon connects from, and resolves names in, for sandboxes;
	// empty: its own.
	NetworkNetns string `toml:"network_netns"`
	// NetworkDNS is the DNS server (host:port) that resolves sandboxes'
	// names; empty: the one /etc/resolv.conf names.
	NetworkDNS string `toml:"network_dns"`
	// SecretsKeyFile is the file of the master key that encrypts the
	// secrets (32 bytes, base64; mode 0600); empty: secrets.key in the
	// data dir, made on first start.
	SecretsKeyFile string `toml:"secrets_key_file"`
	// EgressRootsFile is a PEM file of more roots the egress proxy trusts
	// when it connects to a proxy-injected secret's host itself (besides
	// the system's): an internal CA, say.
	EgressRootsFile string `toml:"egress_roots_file"`
	// RateLimit is how many requests a second each API key may make on
	// average, RateBurst how many at once above that, and MaxStreams how
	// many event streams and WebSockets it may hold open (internal/front/api's
	// limits.go). 0: the default; a negative RateLimit or MaxStreams: no
	// limit. The root-only unix socket has none.
	RateLimit  float64 `toml:"rate_limit"`
	RateBurst  int     `toml:"rate_burst"`
	MaxStreams int     `toml:"max_streams"`
	// MasterKey, when not empty, is the master key itself (base64), from
	// the environment variable HUTCH_MASTER_KEY: it wins over the file.
	// Never in a config file.
	MasterKey string `toml:"-"`

	// Role is what this daemon is among several sharing Store
	// (internal/cluster): RoleAll (the default), a single box; RoleNode,
	// running sandboxes on its host; RoleAPI, serving the API and sending
	// each call on to a node.
	Role string `toml:"role"`
	// NodeName names a node among the others (default: the host's name).
	NodeName string `toml:"node_name"`
	// Advertise is the URL API replicas reach a node's API on: https,
	// which a node serves on Listen with its own certificate, pinned by
	// its record in the store (internal/cluster's tls.go). Default:
	// https:// and Listen, unless Listen is every address.
	Advertise string `toml:"advertise"`
	// ImageStore is where nodes keep suspended sandboxes' images, so that
	// another node can resume them when theirs is lost: a directory every
	// node mounts (NFS), or s3://bucket/prefix?endpoint=… (the keys from
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY). "": none.
	ImageStore string `toml:"image_store"`
	// APIKeyFile holds the daemon's API key (default: api.key in DataDir,
	// made on first start). Nodes and API replicas share one.
	APIKeyFile string `toml:"api_key_file"`
	// Heartbeat is how often a node tells it is up; NodeTimeout how long
	// one may be silent before it is lost (0: internal/cluster's
	// defaults). Flags only.
	Heartbeat   time.Duration `toml:"-"`
	NodeTimeout time.Duration `toml:"-"`
	// SampleInterval is how often each running sandbox's use is sampled
	// (GET /v1/sandboxes/{id}/metrics; 0: internal/core/samples's
	// default). Flags only.
	SampleInterval time.Duration `toml:"-"`
	// EvictionNotice is how long before the end of its max lifetime a
	// sandbox's eviction notice event comes (0: internal/core/events's
	// default). Flags only.
	EvictionNotice time.Duration `toml:"-"`
}

// The roles of Config.Role.
const (
	RoleAll  = "all"
	RoleNode = "node"
	RoleAPI  = "api"
)

// Pool is one warm pool: Size ready sandboxes of Template on Runtime
// (empty: the default runtime).
type Pool struct {
	Template string `toml:"template"`
	Runtime  string `toml:"runtime"`
	Size     int    `toml:"size"`
}

// maxPoolSize bounds one pool: each ready sandbox holds a disk and an agent.
const maxPoolSize = 64

// Default returns the configuration used when nothing is said.
func Default() Config {
	return Config{
		Version:        1,
		Listen:         "127.0.0.1:7070",
		PreviewDomain:  preview.DefaultDomain,
		DataDir:        defaultDataDir,
		Runc:           "runc",
		Runsc:          "runsc",
		LogLevel:       "info",
		Pools:          []Pool{{Template: "base", Size: 2}},
		NetworkDefault: "full",
		Role:           RoleAll,
	}
}

// LoadFile applies a TOML config file over c. Unknown keys are errors.
func (c *Config) LoadFile(path string) error {
	md, err := toml.DecodeFile(path, c)
	if err != nil {
		return fmt.Errorf("read config %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		return fmt.Errorf("config %s: unknown keys %v", path, undecoded)
	}
	return nil
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Version != 1 {
		errs = append(errs, fmt.Errorf("version must be 1, got %d", c.Version))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: %w", c.Listen, err))
	}
	if u, err := url.Parse(c.PublicURL); c.PublicURL != "" && (err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		errs = append(errs, fmt.Errorf("public_url must be an http or https URL, got %q", c.PublicURL))
	}
	if addr := c.e2bListen(); addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("e2b_listen %q: %w", addr, err))
		}
	}
	if c.EvictionNotice < 0 {
		errs = append(errs, fmt.Errorf("eviction notice must not be negative, got %s", c.EvictionNotice))
	}
	if c.SampleInterval != 0 && c.SampleInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("sample interval must be 100ms or more, got %s", c.SampleInterval))
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("metrics_listen %q: %w", c.MetricsListen, err))
		}
	}
	if c.PreviewDomain != "" {
		if err := preview.CheckDomain(c.PreviewDomain); err != nil {
			errs = append(errs, fmt.Errorf("preview_domain: %w", err))
		}
	}
	switch c.ToolsMode {
	case "", tools.ModeAll:
	case tools.ModeSelective, tools.ModeOff:
		if c.ToolsHostDir == "" {
			errs = append(errs, fmt.Errorf("tools_mode %s runs tool calls on the host: it needs tools_host_dir", c.ToolsMode))
		}
	default:
		errs = append(errs, fmt.Errorf("tools_mode must be all, selective or off, got %q", c.ToolsMode))
	}
	if c.ToolsHostDir != "" {
		if fi, err := os.Stat(c.ToolsHostDir); err != nil || !fi.IsDir() || !filepath.IsAbs(c.ToolsHostDir) {
			errs = append(errs, fmt.Errorf("tools_host_dir must be an absolute path to a directory, got %q", c.ToolsHostDir))
		} else if _, err := toolrun.ResolveHostUser(c.ToolsHostUser, c.ToolsHostDir); err != nil {
			errs = append(errs, err)
		}
	} else if c.ToolsHostUser != "" {
		errs = append(errs, fmt.Errorf("tools_host_user is who tool calls run as in tools_host_dir: it needs tools_host_dir"))
	}
	if c.RateBurst < 0 {
		errs = append(errs, fmt.Errorf("rate_burst must be 0 (the default) or more, got %d", c.RateBurst))
	}
	for name, dir := range map[string]string{"data_dir": c.DataDir, "run_dir": c.RunDir} {
		if !filepath.IsAbs(dir) && (name == "data_dir" || dir != "") {
			errs = append(errs, fmt.Errorf("%s must be an absolute path, got %q", name, dir))
		}
	}
	// A unix socket path may hold at most 107 bytes; the agent's lives
	// deepest: <data_dir>/sandboxes/<12-char id>/run/agent.sock.
	if n := len(c.DataDir) + len("/sandboxes/123456789012/run/agent.sock"); n > 107 {
		errs = append(errs, fmt.Errorf("data_dir %q is too long for unix socket paths inside it (%d > 107 bytes)", c.DataDir, n))
	}
	if c.Store != "" {
		if err := postgres.CheckURL(c.Store); err != nil {
			errs = append(errs, fmt.Errorf("store must be empty (SQLite in data_dir) or a PostgreSQL URL, postgres://user@host/database: %w", err))
		}
	}
	if c.Runc == "" {
		errs = append(errs, errors.New("runc must name the runc binary"))
	}
	if c.Runsc == "" {
		errs = append(errs, errors.New("runsc must name gVisor's runsc binary"))
	}
	switch c.Runtime {
	case "", "runc", "gvisor":
	default:
		errs = append(errs, fmt.Errorf("runtime must be runc or gvisor (or empty: gvisor when usable), got %q", c.Runtime))
	}
	for _, p := range c.Pools {
		if p.Template == "" || p.Size < 0 || p.Size > maxPoolSize {
			errs = append(errs, fmt.Errorf("pool %+v: give a template and a size from 0 to %d", p, maxPoolSize))
		}
		switch p.Runtime {
		case "", "runc", "gvisor":
		default:
			errs = append(errs, fmt.Errorf("pool of %s: runtime must be runc or gvisor (or empty: the default), got %q", p.Template, p.Runtime))
		}
	}
	if _, err := netpolicy.ParseMode(c.NetworkDefault); err != nil {
		errs = append(errs, fmt.Errorf("network_default: %w", err))
	}
	if c.NetworkNetns != "" {
		if fi, err := os.Stat(c.NetworkNetns); err != nil || fi.IsDir() || !filepath.IsAbs(c.NetworkNetns) {
			errs = append(errs, fmt.Errorf("network_netns must be the absolute path of a network namespace, got %q", c.NetworkNetns))
		}
	}
	if c.NetworkDNS != "" {
		if _, _, err := net.SplitHostPort(c.NetworkDNS); err != nil {
			errs = append(errs, fmt.Errorf("network_dns must be host:port, got %q", c.NetworkDNS))
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level must be debug, info, warn or error, got %q", c.LogLevel))
	}
	errs = append(errs, c.validateRole()...)
	return errors.Join(errs...)
}

// Paths inside the data and run dirs.
func (c Config) dbPath() string { return filepath.Join(c.DataDir, "hutch.db") }

// masterKey is where the secrets' master key comes from.
func (c Config) masterKey() secrets.KeySource {
	if c.SecretsKeyFile != "" {
		return secrets.KeySource{File: c.SecretsKeyFile, Env: c.MasterKey}
	}
	return secrets.KeySource{File: filepath.Join(c.DataDir, "secrets.key"), Create: true, Env: c.MasterKey}
}
func (c Config) templateDir() string { return filepath.Join(c.DataDir, "templates") }
func (c Config) sandboxDir() string  { return filepath.Join(c.DataDir, "sandboxes") }
func (c Config) volumeDir() string   { return filepath.Join(c.DataDir, "volumes") }
func (c Config) diskDir() string     { return filepath.Join(c.DataDir, "disks") }
func (c Config) agentDir() string    { return filepath.Join(c.DataDir, "agent") }
func (c Config) packageCache() string {
	if c.PackageCache != "" {
		return c.PackageCache
	}
	return filepath.Join(c.DataDir, "cache", "debs")
}
func (c Config) socketPath() string { return filepath.Join(c.runDir(), "hutch.sock") }
func (c Config) stateRoot(runtime string) string {
	return filepath.Join(c.runDir(), runtime)
}

// netnsDir is where a runtime keeps its sandboxes' network namespaces.
func (c Config) netnsDir(runtime string) string {
	return filepath.Join(c.runDir(), "netns", runtime)
}

// runDir is RunDir, or the one derived from the data dir.
func (c Config) runDir() string {
	if c.RunDir != "" {
		return c.RunDir
	}
	return runDirFor(c.DataDir)
}

// e2bTLS has ln answer TLS too, with E2BTLSCert, when it is set.
func (c Config) e2bTLS(ln net.Listener) (net.Listener, error) {
	if c.E2BTLSCert == "" && c.E2BTLSKey == "" {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(c.E2BTLSCert, c.E2BTLSKey)
	if err != nil {
		return nil, fmt.Errorf("--e2b-tls-cert and --e2b-tls-key: %w", err)
	}
	return tlssniff.Listener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// defaultE2BListen is the E2B front's address for the default data dir:
// the port E2B's SDKs know envd by, on the loopback.
const defaultE2BListen = "127.0.0.1:49983"

// e2bListen is the E2B front's address: E2BListen when it is set ("" for
// none), else the default one for the default data dir and a free port on
// the loopback, picked when the daemon listens, for any other. So a
// second daemon given only another --data-dir starts beside the first, as
// it gets a run dir of its own; the API reports the address bound.
func (c Config) e2bListen() string {
	if c.E2BListen != nil {
		return *c.E2BListen
	}
	if filepath.Clean(c.DataDir) == defaultDataDir {
		return defaultE2BListen
	}
	return "127.0.0.1:0"
}

// ensureDirs makes the data and run directories. The data dir and its
// sandboxes dir are open to be searched (not listed) by others: runc reaches
// each sandbox's root from inside the sandbox's user namespace, as a
// stranger, and binds the agent (copied into the agent dir, 0755) likewise.
// The database and the API key are 0600, the disks dir and the runtimes'
// state dirs 0700. So are the templates and volumes dirs: what sandboxes
// wrote is in them (a snapshot, a Hutchfile's RUN, a volume's files),
// setuid-root programs among them, which no user of the host may reach
// to run; sandboxes see them through idmapped clones made by root, or
// through the runtime's root. Those holding a directory per sandbox spread them over
// the filesystem (see spreadSubdirs).
func (c Config) ensureDirs() error {
	dirs := []struct {
		path   string
		mode   os.FileMode
		spread bool
	}{
		{c.DataDir, 0o711, false}, {c.sandboxDir(), 0o711, true}, {c.diskDir(), 0o700, true}, {c.agentDir(), 0o755, false},
		{c.templateDir(), 0o700, false}, {c.volumeDir(), 0o700, false},
		{c.runDir(), 0o700, false}, {c.stateRoot("runc"), 0o700, true}, {c.stateRoot("runsc"), 0o700, true},
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil { // made by an older version, or past the umask
			return err
		}
		if d.spread {
			spreadSubdirs(d.path)
		}
	}
	return nil
}

func (c Config) poolSpecs() []core.PoolSpec {
	var out []core.PoolSpec
	for _, p := range c.Pools {
		out = append(out, core.PoolSpec{Template: p.Template, Runtime: p.Runtime, Size: p.Size})
	}
	return out
}

// ParsePool reads a pool as the --pool flag gives it: TEMPLATE[@RUNTIME]=SIZE.
func ParsePool(s string) (Pool, error) {
	spec, size, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(size)
	if !ok || err != nil {
		return Pool{}, fmt.Errorf("pool %q: want TEMPLATE[@RUNTIME]=SIZE, such as base=2 or base@runc=4", s)
	}
	tmpl, runtime, _ := strings.Cut(spec, "@")
	return Pool{Template: tmpl, Runtime: runtime, Size: n}, nil
}

// publicURL is PublicURL, or the one Listen makes.
func (c Config) publicURL() string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	return "http://" + c.Listen
}

// validateRole checks what a role needs: nodes and API replicas share a
// PostgreSQL store and one API key, and a node says where it is reached.
func (c Config) validateRole() []error {
	var errs []error
	switch c.Role {
	case "", RoleAll:
		return nil
	case RoleNode, RoleAPI:
	default:
		return []error{fmt.Errorf("role must be all, node or api, got %q", c.Role)}
	}
	if c.Store == "" {
		errs = append(errs, fmt.Errorf("role %s shares its state with the other daemons: give store, a PostgreSQL URL (postgres://user@host/database)", c.Role))
	}
	if c.APIKeyFile == "" {
		errs = append(errs, fmt.Errorf("role %s accepts the key every node and replica accepts: give api_key_file, a file holding it", c.Role))
	}
	if c.Heartbeat < 0 || c.NodeTimeout < 0 || c.NodeTimeout != 0 && c.NodeTimeout <= c.Heartbeat {
		errs = append(errs, fmt.Errorf("node timeout (%s) must be longer than the heartbeat (%s)", c.NodeTimeout, c.Heartbeat))
	}
	if c.Role == RoleNode {
		if _, err := c.advertise(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// advertise is the URL API replicas reach this node on: https only, since
// a node serves nothing else (plain http is not an option, not even for
// tests: they call nodes as replicas do).
func (c Config) advertise() (string, error) {
	if c.Advertise != "" {
		u, err := url.Parse(c.Advertise)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" {
			return "", fmt.Errorf("advertise must be an https URL with no path, such as https://10.0.0.5:7070 (a node serves its API over TLS only), got %q", c.Advertise)
		}
		return strings.TrimSuffix(c.Advertise, "/"), nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if ip := net.ParseIP(host); err != nil || host == "" || ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("listen %q is every address: give advertise, the URL API replicas reach this node on", c.Listen)
	}
	return "https://" + c.Listen, nil
}

// nodeName is this node's name.
func (c Config) nodeName() (string, error) {
	if c.NodeName != "" {
		return c.NodeName, nil
	}
	return os.Hostname()
}

// keyPath is where the API key is kept.
func (c Config) keyPath() string {
	if c.APIKeyFile != "" {
		return c.APIKeyFile
	}
	return filepath.Join(c.DataDir, "api.key")
}

// nodeNameOf is the name the sandbox core records its sandboxes under:
// the node's, or "" on a single box (Validate checked that a node has one).
func (c Config) nodeNameOf() string {
	if c.Role != RoleNode {
		return ""
	}
	name, _ := c.nodeName()
	return name
}
