package core

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"

	"github.com/miekg/dns"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/net/mitm"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/net/netproxy"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// A sandbox's network, as the daemon serves it. A backend that gives
// sandboxes a network (backend.Networked) sends all of a sandbox's traffic
// to a router namespace of its own; while the sandbox runs, the daemon
// listens there (see sandboxnet): its TCP proxy and its DNS resolver decide
// every connection and lookup by the sandbox's policy, which a call may
// change at any time for the next ones. What they refuse is an event in
// the sandbox's log; what they carry is counted.

// NetworkConfig is how the daemon reaches the outside for sandboxes.
type NetworkConfig struct {
	// Default is the policy of a sandbox created without one.
	Default netpolicy.Policy
	// Dial connects to an address the policy allowed (a net.Dialer's
	// by default).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Lookup resolves a name (net.DefaultResolver.LookupNetIP by default).
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Interceptor swaps proxy-injected secrets in on their hosts'
	// connections (see secrets.go); nil: none is swapped.
	Interceptor *mitm.Interceptor
	// Trust is a host directory holding the certificate of the
	// Interceptor's CA (ca.crt) and a bundle of it with the system's
	// roots (ca-bundle.crt): it is mounted read-only at TrustDir in every
	// sandbox, and commands given a proxy-injected secret are pointed at
	// it. "": none.
	Trust string
}

// sandboxNet is one sandbox's network state, kept from its create to its
// delete, across suspends and the instances they make.
type sandboxNet struct {
	checker atomic.Pointer[netpolicy.Checker]
	events  netproxy.Log
	proxy   *netproxy.Proxy
	dns     *netproxy.DNS
	// swaps are the proxy-injected secrets its commands were given.
	swaps swaps
}

// netOf returns sandbox id's network state, made with policy p if it has
// none yet. A policy that does not compile (a record from an older
// daemon, say) refuses everything.
func (m *Manager) netOf(id string, p netpolicy.Policy) *sandboxNet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sn, ok := m.nets[id]; ok {
		return sn
	}
	sn := &sandboxNet{}
	checker, err := netpolicy.Compile(p)
	if err != nil {
		m.log.Error("network policy does not compile: the sandbox reaches nothing", attrSandbox, id, "error", err)
		checker, _ = netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.None})
	}
	sn.checker.Store(checker)
	refused := func(ev netproxy.Event) {
		sn.events.Add(ev)
		m.log.Debug("network refusal", attrSandbox, id, "kind", ev.Kind, "dest", ev.Dest, "rule", ev.Rule)
	}
	sn.proxy = &netproxy.Proxy{
		Policy:      sn.checker.Load,
		OriginalDst: netproxy.OriginalDst,
		Lookup:      m.netCfg.Lookup,
		Dial:        m.netCfg.Dial,
		Refused:     refused,
		Swaps:       sn.swaps.forHost,
		Interceptor: m.netCfg.Interceptor,
	}
	// Sandboxes have IPv4 only (see sandboxnet).
	sn.dns = &netproxy.DNS{Policy: sn.checker.Load, Lookup: m.netCfg.Lookup, Refused: refused, IPv4Only: true}
	m.nets[id] = sn
	return sn
}

// dropNet forgets a deleted sandbox's network state.
func (m *Manager) dropNet(id string) {
	m.mu.Lock()
	delete(m.nets, id)
	m.mu.Unlock()
}

// serveNetwork opens the daemon's listeners in inst's router namespace and
// serves them until inst.stopNetwork. A backend without networks has
// nothing to serve.
func (m *Manager) serveNetwork(ctx context.Context, inst *instance, p netpolicy.Policy) error {
	nb, ok := inst.backend.(backend.Networked)
	if !ok {
		return nil
	}
	router, err := nb.Network(ctx, inst.handle)
	if err != nil || router == "" {
		return err
	}
	ls, err := (&sandboxnet.Net{Router: router}).Listen()
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", inst.id, err)
	}
	sn := m.netOf(inst.id, p)
	sctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	servers := []*dns.Server{
		{PacketConn: ls.DNSUDP, Handler: sn.dns},
		{Listener: ls.DNSTCP, Handler: sn.dns, ReadTimeout: 10 * time.Second},
	}
	for _, s := range servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() {
			if err := s.ActivateAndServe(); err != nil && sctx.Err() == nil {
				m.log.Warn("sandbox DNS stopped", attrSandbox, inst.id, "error", err)
			}
		})
		<-started // Shutdown needs a started server
	}
	wg.Go(func() {
		if err := sn.proxy.Serve(sctx, ls.Proxy); err != nil {
			m.log.Warn("sandbox proxy stopped", attrSandbox, inst.id, "error", err)
		}
	})
	// The router refuses UDP other than DNS itself, and tells.
	wg.Go(func() {
		for {
			dests, err := ls.RefusedUDP.Read()
			if err != nil {
				return // closed at stopNetwork
			}
			for _, d := range dests {
				sn.proxy.Refused(netproxy.Event{Time: time.Now().UTC(), Kind: "udp", Dest: d.String(), Rule: "always",
					Reason: d.String() + ": UDP is refused, but for DNS to the sandbox's resolver"})
			}
		}
	})
	inst.setNetStop(func() {
		cancel()
		for _, s := range servers {
			_ = s.Shutdown() // closes its listener
		}
		_ = ls.Close()
		wg.Wait()
	})
	return nil
}

// Networks is the core's part for its sandboxes' networks (m.Networks()):
// their policies, what the policies refused, what they carried.
type Networks struct{ m *Manager }

// Networks returns the core's part for its sandboxes' networks.
func (m *Manager) Networks() Networks { return Networks{m} }

// Set changes a sandbox's network policy: its next connections and
// lookups are decided by p, running or not, without a restart.
func (n Networks) Set(ctx context.Context, id string, p netpolicy.Policy) (*Sandbox, error) {
	m := n.m
	checker, err := netpolicy.Compile(p)
	if err != nil {
		return nil, errdefs.InvalidArgument("network: %v", err)
	}
	unlock, err := m.locks.Lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.State == store.Deleting {
		return nil, errdefs.Conflict("sandbox %s is being deleted", id)
	}
	if err := m.store.SetNetwork(ctx, id, p, m.clock.Now().UTC()); err != nil {
		return nil, err
	}
	m.netOf(id, p).checker.Store(checker)
	m.log.Info("network policy changed", attrSandbox, id, "mode", p.Mode, "allow", len(p.Allow), "deny", len(p.Deny))
	return m.get(ctx, id)
}

// Events returns the log of a sandbox's refused connections and lookups.
func (n Networks) Events(ctx context.Context, id string) (*netproxy.Log, error) {
	rec, err := n.m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return &n.m.netOf(id, rec.Network).events, nil
}

// NetworkCounters are what a sandbox's connections carried since the
// daemon started.
type NetworkCounters struct {
	BytesOut, BytesIn, Connections int64
}

// Counters returns sandbox id's counters (zero if it has no network state
// yet).
func (n Networks) Counters(id string) NetworkCounters {
	m := n.m
	m.mu.Lock()
	sn := m.nets[id]
	m.mu.Unlock()
	if sn == nil {
		return NetworkCounters{}
	}
	return NetworkCounters{BytesOut: sn.proxy.BytesOut.Load(), BytesIn: sn.proxy.BytesIn.Load(), Connections: sn.proxy.Connections.Load()}
}

// Default is the policy of a sandbox created without one.
func (n Networks) Default() netpolicy.Policy { return n.m.netCfg.Default }

// checkNetwork fills in and checks a create's network policy.
func (m *Manager) checkNetwork(p *netpolicy.Policy, ceiling netpolicy.Mode) (netpolicy.Policy, error) {
	if p == nil {
		if ceiling != "" && !m.netCfg.Default.Mode.AtMost(ceiling) {
			return netpolicy.Policy{Mode: ceiling}, nil
		}
		return m.netCfg.Default, nil
	}
	if _, err := netpolicy.Compile(*p); err != nil {
		return netpolicy.Policy{}, errdefs.InvalidArgument("network: %v", err)
	}
	if ceiling != "" && !p.Mode.AtMost(ceiling) {
		return netpolicy.Policy{}, errdefs.PermissionDenied("network mode %s is more than this key allows: its sandboxes may have mode %s at most", p.Mode, ceiling)
	}
	return *p, nil
}

// withDefaults fills in the default policy and how the daemon reaches the
// outside.
func (c NetworkConfig) withDefaults() NetworkConfig {
	if c.Default.Mode == "" {
		c.Default.Mode = netpolicy.Full
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.Lookup == nil {
		c.Lookup = net.DefaultResolver.LookupNetIP
	}
	return c
}
