package rootfs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/egress"
)

// A workspace's key names registries to pull from, and the daemon fetches
// from them: without a check, any key could have the daemon ask the host's
// own services (a registry on loopback, cloud metadata at 169.254.169.254,
// anything on a private network) and read their answers back in errors.
// So a workspace's pulls reach public addresses only, as a sandbox's
// traffic does (egress.Outward), checked on every dial; the administrator's
// reach any (a registry on the host's network is theirs to use).

// outwardAddrs resolves host and returns its addresses, refusing it when
// any of them leads inward: a name with one public address and one private
// one is not a public name.
func outwardAddrs(ctx context.Context, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, errdefs.InvalidArgument("resolve %s: %v", host, err)
		}
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
		if !egress.Outward(addrs[i]) {
			return nil, errdefs.PermissionDenied("%s is at %s, an address of the host's own or a private network: a workspace's key reaches public addresses only; pull from a public registry, or have the daemon's own key (api.key) build the template", host, addrs[i])
		}
	}
	if len(addrs) == 0 {
		return nil, errdefs.InvalidArgument("resolve %s: no addresses", host)
	}
	return addrs, nil
}

// registryHost is the host name of ref's registry, without its port.
func registryHost(ref name.Reference) string {
	reg := ref.Context().RegistryStr()
	if host, _, err := net.SplitHostPort(reg); err == nil {
		return host
	}
	return reg
}

// outwardTransport is remote's default transport, dialling only public
// addresses. Through the host's own HTTP proxy, if it has one, the proxy
// is dialled, and the registry's addresses are checked before the request
// goes to it.
func outwardTransport() http.RoundTripper {
	base, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		base, _ = http.DefaultTransport.(*http.Transport) // the standard library's: always one
	}
	t := base.Clone()
	proxies := proxyAddrs()
	t.Proxy = func(req *http.Request) (*url.URL, error) {
		u, err := http.ProxyFromEnvironment(req)
		if u == nil || err != nil {
			return u, err
		}
		if _, err := outwardAddrs(req.Context(), req.URL.Hostname()); err != nil {
			return nil, err
		}
		return u, nil
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if proxies[addr] {
			return dialer.DialContext(ctx, network, addr)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		addrs, err := outwardAddrs(ctx, host)
		if err != nil {
			return nil, err
		}
		var errs []error
		for _, a := range addrs {
			conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	return t
}

// proxyAddrs are the host:port of the HTTP proxies the environment names.
func proxyAddrs() map[string]bool {
	out := map[string]bool{}
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		u, err := url.Parse(os.Getenv(v))
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443"}[u.Scheme]
			port = orDefault(port, "80")
		}
		out[net.JoinHostPort(u.Hostname(), port)] = true
	}
	return out
}
