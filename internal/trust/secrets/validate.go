package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/egress"
)

// Limits of a secret.
const (
	// MaxValue bounds a value: it becomes an environment variable, and the
	// kernel bounds a command's environment.
	MaxValue = 64 << 10
	// MaxDescription bounds a description, in bytes.
	MaxDescription = 512
	// MaxHosts bounds the hosts of a proxy secret.
	MaxHosts = 32
)

// Compiled on first use, not at start (see workspace's validName).
var (
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })
	userRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`) })
)

// PlaceholderPrefix begins every proxy secret's placeholder.
const PlaceholderPrefix = "hutch-secret-"

// newPlaceholder makes a proxy secret's placeholder: the prefix, its
// name, and 24 random hex digits, so that it is told from any other.
func newPlaceholder(name string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand's contract since Go 1.24)
	return PlaceholderPrefix + name + "-" + hex.EncodeToString(b)
}

func checkWorkspace(workspace string) error {
	if workspace == "" {
		return errdefs.InvalidArgument("no workspace given")
	}
	return nil
}

func checkUser(user string) error {
	if user != "" && !userRE().MatchString(user) {
		return errdefs.InvalidArgument("user %q is not a user id: up to 128 letters, digits, '.', '_', '@' or '-', beginning with a letter or digit", clip(user))
	}
	return nil
}

// checkName checks a secret's name: the environment variable it becomes.
func checkName(name string) error {
	if !nameRE().MatchString(name) {
		return errdefs.InvalidArgument("secret name %q is not an environment variable name: up to 128 letters, digits or '_', not beginning with a digit (such as OPENAI_API_KEY)", clip(name))
	}
	return nil
}

// checkOwner checks whose secret is meant.
func checkOwner(workspace, user string) error {
	if err := checkWorkspace(workspace); err != nil {
		return err
	}
	return checkUser(user)
}

func checkValue(v []byte) error {
	switch {
	case len(v) == 0:
		return errdefs.InvalidArgument("the secret's value is empty")
	case len(v) > MaxValue:
		return errdefs.InvalidArgument("the secret's value is %d bytes, more than the %d a secret may hold", len(v), MaxValue)
	case bytes.IndexByte(v, 0) >= 0:
		return errdefs.InvalidArgument("the secret's value holds a NUL byte, which an environment variable cannot; encode it (base64, say) first")
	}
	return nil
}

func checkDescription(d string) error {
	if len(d) > MaxDescription {
		return errdefs.InvalidArgument("the description is %d bytes, more than the %d allowed", len(d), MaxDescription)
	}
	if !utf8.ValidString(d) {
		return errdefs.InvalidArgument("the description is not UTF-8 text")
	}
	return nil
}

// checkInject checks how a secret is injected and the hosts it is for,
// and returns them as stored: inject "" is env; hosts lower-cased, without
// repeats.
func checkInject(inject string, hosts []string) (string, []string, error) {
	switch inject {
	case "", InjectEnv:
		if len(hosts) > 0 {
			return "", nil, errdefs.InvalidArgument("hosts are only for a secret with inject proxy: an env secret's value is in the sandbox, for any host")
		}
		return InjectEnv, nil, nil
	case InjectProxy:
	default:
		return "", nil, errdefs.InvalidArgument("inject must be env or proxy, got %q", clip(inject))
	}
	if len(hosts) == 0 {
		return "", nil, errdefs.InvalidArgument("a secret with inject proxy needs the hosts it is for (such as api.example.com or *.example.com): the proxy puts its value only into connections to them")
	}
	if len(hosts) > MaxHosts {
		return "", nil, errdefs.InvalidArgument("%d hosts, more than the %d a secret may have", len(hosts), MaxHosts)
	}
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		norm, err := normalHost(h)
		if err != nil {
			return "", nil, err
		}
		if !slices.Contains(out, norm) {
			out = append(out, norm)
		}
	}
	return InjectProxy, out, nil
}

// normalHost checks a proxy secret's host: a domain name of two labels at
// least, or a wildcard "*.example.com" for its subdomains (not
// example.com itself), either with an optional ":port"; lower-cased. An
// address is refused: the proxy swaps a placeholder on the name a
// connection is made for, which it reads (TLS SNI, HTTP Host).
func normalHost(entry string) (string, error) {
	bad := func(why string) (string, error) {
		return "", errdefs.InvalidArgument("host %q: %s (write a domain name such as api.example.com or *.example.com, optionally with :port)", clip(entry), why)
	}
	host := strings.ToLower(strings.TrimSpace(entry))
	port := ""
	if strings.Contains(host, ":") {
		h, p, err := net.SplitHostPort(host)
		if err != nil {
			return bad("not a host name with a port")
		}
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 || p[0] == '0' {
			return bad("the port is not a number from 1 to 65535")
		}
		host, port = h, p
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return bad("an address, not a name")
	}
	suffix, wildcard := strings.CutPrefix(host, "*.")
	if !egress.ValidHostname(suffix) {
		return bad("not a domain name")
	}
	if !strings.Contains(suffix, ".") {
		if wildcard {
			return bad("a wildcard over a whole top-level domain")
		}
		return bad("not a full domain name")
	}
	if last := suffix[strings.LastIndexByte(suffix, '.')+1:]; strings.Trim(last, "0123456789") == "" {
		return bad("an address, not a name")
	}
	if port != "" {
		host += ":" + port
	}
	return host, nil
}

// clip shortens what a caller gave to quote it in an error.
func clip(s string) string {
	const most = 130
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}
