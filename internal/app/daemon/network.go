package daemon

import (
	"context"
	"net"

	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
)

// networkConfig is how the daemon reaches the outside for sandboxes: from
// its own network namespace or NetworkNetns, resolving names with the
// system's DNS server or NetworkDNS.
func (c Config) networkConfig() network.Config {
	dial := (&net.Dialer{}).DialContext
	if ns := c.NetworkNetns; ns != "" {
		dial = func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			err = sandboxnet.InNetns(ns, func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		}
	}
	resolver := net.DefaultResolver
	if c.NetworkNetns != "" || c.NetworkDNS != "" {
		server := c.NetworkDNS
		resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			if server != "" {
				address = server
			}
			return dial(ctx, network, address)
		}}
	}
	return network.Config{
		Default: netpolicy.Policy{Mode: netpolicy.Mode(c.NetworkDefault)},
		Dial:    dial,
		Lookup:  resolver.LookupNetIP,
	}
}
