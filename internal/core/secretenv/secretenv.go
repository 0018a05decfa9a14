// Package secretenv gives a sandbox's commands their secrets: a hook of
// the lifecycle kernel (hook.Preparer, hook.Enver, hook.Binder,
// hook.Deleter), and the swaps the sandbox's network proxy asks for.
//
// Secrets reach a sandbox only as environment variables of each command
// and background process it runs, resolved when the command starts: never
// in its files, nor in its agent's own environment, nor in the record of
// its env. A command gets its workspace's secrets overlaid with the
// personal ones of the user it runs for (the call's, or the sandbox's),
// narrowed to the names the sandbox was made with, if any. They go over
// the sandbox's env (its template's and its create's), and the command's
// own env goes over them: a command that names a variable gets its
// value.
//
// A secret injected by proxy puts its placeholder in the variable; the
// sandbox's network proxy swaps the value in on connections to the
// secret's hosts only (see Swap), looking it up for every request, so
// that a secret deleted or given a new value is swapped no more, or
// swapped anew, from the next request on. Commands given such a secret
// are pointed at a bundle of the CA those connections are served with
// (TrustDir), which every sandbox mounts.
package secretenv

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/mitm"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Source resolves the secrets a command gets (the daemon's vault).
type Source interface {
	// ForCommand returns the variables of workspace ws's secrets for
	// user (personal over the workspace's), narrowed to names when not
	// nil, and the swaps of those injected by proxy.
	ForCommand(ctx context.Context, ws, user string, names []string) (SecretEnv, error)
	// Check says which of names neither workspace ws nor its user has
	// (an ErrInvalidArgument naming them), or nil.
	Check(ctx context.Context, ws, user string, names []string) error
}

// SecretEnv is what a command gets of its secrets.
type SecretEnv struct {
	// Env maps each secret's name to its value, or to its placeholder for
	// one injected by proxy. Never log it.
	Env map[string]string
	// Swaps are the proxy's: placeholders and their values.
	Swaps []Swap
}

// Swap is a secret injected by proxy: the proxy puts Value in place of
// Placeholder in requests to Hosts (in headers, and in query strings
// with Query).
type Swap struct {
	Placeholder string
	Value       string
	Hosts       []string
	Query       bool
}

// String hides the value from logs and %v.
func (s Swap) String() string { return "swap of " + s.Placeholder }

// Config wires Secrets.
type Config struct {
	Source Source
	// Trust is a host directory holding the certificate of the CA that
	// serves proxy-injected secrets' connections (ca.crt) and a bundle of
	// it with the system's roots (ca-bundle.crt): it is mounted read-only
	// at TrustDir in every sandbox, and commands given a proxy-injected
	// secret are pointed at it. "": none.
	Trust string
}

// Secrets is the hook. It is safe for concurrent use.
type Secrets struct {
	source Source
	trust  string

	mu    sync.Mutex
	swaps map[string]*swaps // by sandbox
}

// New returns the hook.
func New(cfg Config) *Secrets {
	return &Secrets{source: cfg.Source, trust: cfg.Trust, swaps: map[string]*swaps{}}
}

// Name names the hook.
func (s *Secrets) Name() string { return "secrets" }

// Prepare refuses a create that names secrets neither its workspace nor
// its user has (hook.Preparer).
func (s *Secrets) Prepare(ctx context.Context, opts *create.Options) error {
	if opts.Secrets == nil {
		return nil
	}
	return s.source.Check(ctx, opts.Workspace, opts.User, opts.Secrets)
}

// CommandEnv puts c's secrets over env, and, when some are injected by
// proxy, the trust of the proxy's CA under it; the sandbox's proxy learns
// their swaps (hook.Enver). A warm pool's sandbox, no one's yet, gets none.
func (s *Secrets) CommandEnv(ctx context.Context, c hook.Command, env map[string]string) error {
	if c.Workspace == "" {
		return nil
	}
	owner := owner{workspace: c.Workspace, user: c.User, names: c.Secrets}
	sec, err := s.source.ForCommand(ctx, owner.workspace, owner.user, owner.names)
	if err != nil {
		return err
	}
	if len(sec.Swaps) > 0 {
		s.swapsOf(c.Sandbox).add(s.source, owner, sec.Swaps)
		if s.trust != "" {
			for k, v := range trustEnv { // the sandbox's own env may say otherwise
				if _, set := env[k]; !set {
					env[k] = v
				}
			}
		}
	}
	maps.Copy(env, sec.Env)
	return nil
}

// Binds mount the proxy's CA read-only in every sandbox (hook.Binder).
func (s *Secrets) Binds(*create.Options) []backend.Bind {
	if s.trust == "" {
		return nil
	}
	return []backend.Bind{{Source: s.trust, Destination: TrustDir}}
}

// Deleted forgets a deleted sandbox's swaps (hook.Deleter).
func (s *Secrets) Deleted(id string) {
	s.mu.Lock()
	delete(s.swaps, id)
	s.mu.Unlock()
}

// ForHost returns the swaps of sandbox's proxy for a request to
// name:port, with their values of now (see swaps.forHost): the network
// plane's netproxy.Proxy.Swaps.
func (s *Secrets) ForHost(sandbox, name string, port uint16) []mitm.Swap {
	s.mu.Lock()
	sw := s.swaps[sandbox]
	s.mu.Unlock()
	if sw == nil {
		return nil
	}
	return sw.forHost(name, port)
}

func (s *Secrets) swapsOf(sandbox string) *swaps {
	s.mu.Lock()
	defer s.mu.Unlock()
	sw, ok := s.swaps[sandbox]
	if !ok {
		sw = &swaps{}
		s.swaps[sandbox] = sw
	}
	return sw
}

// owner is whose secrets a command gets.
type owner struct {
	workspace string
	user      string
	names     []string // nil: all of them
}

// TrustDir is where a sandbox finds the certificate of the CA its
// proxy-injected secrets' connections are served with (ca.crt), and a
// bundle of it with the system's roots (ca-bundle.crt).
const TrustDir = "/etc/hutch"

// trustEnv points a command's TLS clients at the bundle with the daemon's
// CA in it: OpenSSL's (curl, Python's ssl), git's (Debian's is built on
// GnuTLS, which reads neither SSL_CERT_FILE nor CURL_CA_BUNDLE), Python
// requests', Node's and Deno's. Only commands given a proxy-injected
// secret get it.
var trustEnv = map[string]string{
	"SSL_CERT_FILE":       TrustDir + "/ca-bundle.crt",
	"GIT_SSL_CAINFO":      TrustDir + "/ca-bundle.crt",
	"REQUESTS_CA_BUNDLE":  TrustDir + "/ca-bundle.crt",
	"CURL_CA_BUNDLE":      TrustDir + "/ca-bundle.crt",
	"NODE_EXTRA_CA_CERTS": TrustDir + "/ca.crt",
	"DENO_CERT":           TrustDir + "/ca.crt",
}

// swaps are the secrets a sandbox's proxy swaps in: those its commands
// got the placeholders of. Only the placeholders are kept, with whose
// secrets they are: the values are looked up for every request (the
// source answers from memory until a secret changes, and forgets at
// once when one does), so that a value is never swapped after its
// secret was deleted or given another.
type swaps struct {
	mu     sync.Mutex
	source Source
	given  map[string][]owner // by placeholder: whose commands got it
}

// swapLookup bounds the source's lookup of a request's swaps, which reads
// the store only after a secret changed.
const swapLookup = 5 * time.Second

func (s *swaps) add(source Source, o owner, list []Swap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.source = source
	if s.given == nil {
		s.given = map[string][]owner{}
	}
	for _, sw := range list {
		if !slices.ContainsFunc(s.given[sw.Placeholder], o.same) {
			s.given[sw.Placeholder] = append(s.given[sw.Placeholder], o)
		}
	}
}

// forHost returns the swaps for a request to name:port, with their values
// of now: those of the secrets given whose hosts name it (a host without
// a port is for 443). A secret that is gone, or whose lookup fails, is
// not swapped: its placeholder goes on as it is.
func (s *swaps) forHost(name string, port uint16) []mitm.Swap {
	s.mu.Lock()
	source := s.source
	given := make(map[string][]owner, len(s.given))
	var owners []owner
	for p, os := range s.given {
		given[p] = slices.Clone(os)
		for _, o := range os {
			if !slices.ContainsFunc(owners, o.same) {
				owners = append(owners, o)
			}
		}
	}
	s.mu.Unlock()
	if source == nil || len(owners) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), swapLookup)
	defer cancel()
	var out []mitm.Swap
	for _, o := range owners {
		sec, err := source.ForCommand(ctx, o.workspace, o.user, o.names)
		if err != nil {
			continue
		}
		for _, sw := range sec.Swaps {
			if !slices.ContainsFunc(given[sw.Placeholder], o.same) {
				continue // not a placeholder this owner's commands got
			}
			if slices.ContainsFunc(out, func(o mitm.Swap) bool { return o.Placeholder == sw.Placeholder }) {
				continue
			}
			if slices.ContainsFunc(sw.Hosts, func(h string) bool { return hostMatches(h, name, port) }) {
				out = append(out, mitm.Swap{Placeholder: sw.Placeholder, Value: sw.Value, Query: sw.Query})
			}
		}
	}
	return out
}

// same reports whether o and other are one owner.
func (o owner) same(other owner) bool {
	return o.workspace == other.workspace && o.user == other.user && slices.Equal(o.names, other.names) && (o.names == nil) == (other.names == nil)
}

// hostMatches says whether a secret's host entry ("api.example.com",
// "*.example.com", either with ":port") names name:port.
func hostMatches(entry, name string, port uint16) bool {
	host, p, err := net.SplitHostPort(entry)
	if err != nil {
		host, p = entry, "443"
	}
	if p != strconv.Itoa(int(port)) {
		return false
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		return strings.HasSuffix(name, "."+suffix)
	}
	return name == host
}
