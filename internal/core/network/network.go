// Package network is the sandboxes' network plane, as the daemon serves
// it: a hook of the lifecycle kernel (hook.Preparer, hook.Starter,
// hook.Claimer, hook.Deleter), and what the API asks of the sandboxes'
// networks (their policies, refusals and counters).
//
// A backend that gives sandboxes a network (backend.Networked) sends all
// of a sandbox's traffic to a router namespace of its own; while the
// sandbox runs, the daemon listens there (see sandboxnet): its TCP proxy
// and its DNS resolver decide every connection and lookup by the
// sandbox's policy, which a call may change at any time for the next
// ones. What they refuse is an event in the sandbox's log; what they
// carry is counted.
package network

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/net/mitm"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/net/netproxy"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Store is what the plane reads and writes of the sandboxes' records.
type Store interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	SetNetwork(ctx context.Context, id string, p netpolicy.Policy, at time.Time) error
}

// Config is how the daemon reaches the outside for sandboxes.
type Config struct {
	Store Store
	// Default is the policy of a sandbox created without one.
	Default netpolicy.Policy
	// Dial connects to an address the policy allowed (a net.Dialer's
	// by default).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Lookup resolves a name (net.DefaultResolver.LookupNetIP by default).
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Interceptor swaps proxy-injected secrets in on their hosts'
	// connections; Swaps says which, for a sandbox's request to
	// name:port (secretenv.Secrets.ForHost). Nil: none is swapped.
	Interceptor *mitm.Interceptor
	Swaps       func(sandbox, name string, port uint16) []mitm.Swap
	// Now tells the time of records (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
}

// Plane serves the sandboxes' networks. It is safe for concurrent use.
type Plane struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	nets map[string]*sandboxNet
	// gone is what deleted sandboxes' connections carried, and refusals
	// what every sandbox's policy refused (see Totals).
	gone     Counters
	refusals map[Refusal]int64
}

// New returns a Plane.
func New(cfg Config) *Plane {
	cfg = cfg.withDefaults()
	p := &Plane{cfg: cfg, log: cfg.Logger, nets: map[string]*sandboxNet{}, refusals: map[Refusal]int64{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Name names the hook.
func (p *Plane) Name() string { return "network" }

// attrSandbox is the log attribute of a sandbox's id.
const attrSandbox = "sandbox_id"

// sandboxNet is one sandbox's network state, kept from its create to its
// delete, across suspends and the instances they make.
type sandboxNet struct {
	checker atomic.Pointer[netpolicy.Checker]
	events  netproxy.Log
	history netproxy.History // every connection and lookup, with its rule
	// agent is the running sandbox's agent, which writes RefusalsFile
	// (nil while it does not run); told says whether a write of it is
	// due.
	agent atomic.Pointer[agentclient.Client]
	told  atomic.Bool
	proxy *netproxy.Proxy
	dns   *netproxy.DNS
}

// netOf returns sandbox id's network state, made with policy pol if it
// has none yet. A policy that does not compile (a record from an older
// daemon, say) refuses everything.
func (p *Plane) netOf(id string, pol netpolicy.Policy) *sandboxNet {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sn, ok := p.nets[id]; ok {
		return sn
	}
	sn := &sandboxNet{}
	checker, err := netpolicy.Compile(pol)
	if err != nil {
		p.log.Error("network policy does not compile: the sandbox reaches nothing", attrSandbox, id, "error", err)
		checker, _ = netpolicy.Compile(netpolicy.Policy{Mode: netpolicy.None})
	}
	sn.setPolicy(checker)
	refused := func(ev netproxy.Event) {
		sn.events.Add(ev)
		p.countRefusal(ev)
		p.tell(id, sn)
		p.log.Debug("network refusal", attrSandbox, id, "kind", ev.Kind, "dest", ev.Dest, "rule", ev.Rule)
	}
	var swaps func(name string, port uint16) []mitm.Swap
	if p.cfg.Swaps != nil {
		swaps = func(name string, port uint16) []mitm.Swap { return p.cfg.Swaps(id, name, port) }
	}
	sn.proxy = &netproxy.Proxy{
		Policy:      sn.checker.Load,
		OriginalDst: netproxy.OriginalDst,
		Lookup:      p.cfg.Lookup,
		Dial:        p.cfg.Dial,
		Refused:     refused,
		Logged:      sn.history.Add,
		Swaps:       swaps,
		Interceptor: p.cfg.Interceptor,
	}
	// Sandboxes have IPv4 only (see sandboxnet).
	sn.dns = &netproxy.DNS{Policy: sn.checker.Load, Lookup: p.cfg.Lookup, Refused: refused, Logged: sn.history.Add, IPv4Only: true}
	p.nets[id] = sn
	return sn
}

// setPolicy has sn's connections decided by checker from now on, and
// learns what they reach while its mode is learn.
func (sn *sandboxNet) setPolicy(checker *netpolicy.Checker) {
	sn.checker.Store(checker)
	sn.history.Learning(checker.Policy().Mode == netpolicy.Learn)
}

// Deleted forgets a deleted sandbox's network state (hook.Deleter).
func (p *Plane) Deleted(id string) {
	p.mu.Lock()
	if sn := p.nets[id]; sn != nil {
		p.gone = p.gone.plus(sn.counters())
	}
	delete(p.nets, id)
	p.mu.Unlock()
}

// Prepare fills in and checks a create's network policy: the default when
// it asks for none, lowered to the caller's ceiling; one above the
// ceiling is refused (hook.Preparer).
func (p *Plane) Prepare(_ context.Context, opts *create.Options) error {
	pol, err := p.checkNetwork(opts.Network, opts.NetworkCeiling)
	if err != nil {
		return err
	}
	opts.Network = &pol
	return nil
}

// Claimed sets the policy of a warm pool's sandbox, served until now
// refusing everything, to its taker's (hook.Claimer).
func (p *Plane) Claimed(_ context.Context, l hook.Live) {
	checker, err := netpolicy.Compile(l.Network)
	if err != nil { // checked by Prepare
		p.log.Error("network policy does not compile: the sandbox reaches nothing", attrSandbox, l.ID, "error", err)
		return
	}
	p.netOf(l.ID, l.Network).setPolicy(checker)
}

// Start opens the daemon's listeners in the sandbox's router namespace and
// serves them until stop (hook.Starter). A backend without networks has
// nothing to serve.
func (p *Plane) Start(ctx context.Context, l hook.Live) (stop func(), err error) {
	nb := l.Backend.Capabilities().Network
	if nb == nil {
		return nil, nil
	}
	router, err := nb.Network(ctx, l.Handle)
	if err != nil || router == "" {
		return nil, err
	}
	ls, err := (&sandboxnet.Net{Router: router}).Listen()
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", l.ID, err)
	}
	sn := p.netOf(l.ID, l.Network)
	sn.agent.Store(l.Agent)
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
				p.log.Warn("sandbox DNS stopped", attrSandbox, l.ID, "error", err)
			}
		})
		<-started // Shutdown needs a started server
	}
	wg.Go(func() {
		if err := sn.proxy.Serve(sctx, ls.Proxy); err != nil {
			p.log.Warn("sandbox proxy stopped", attrSandbox, l.ID, "error", err)
		}
	})
	// The router refuses UDP other than DNS itself, and tells.
	wg.Go(func() {
		for {
			dests, err := ls.RefusedUDP.Read()
			if err != nil {
				return // closed at stop
			}
			for _, d := range dests {
				now := time.Now().UTC()
				reason := d.String() + ": UDP is refused, but for DNS to the sandbox's resolver"
				sn.proxy.Refused(netproxy.Event{Time: now, Kind: "udp", Dest: d.String(), Rule: "always", Reason: reason})
				sn.history.Add(netproxy.Entry{Time: now, Kind: "udp", Addr: d.Addr().String(), Port: d.Port(), Rule: "always", Reason: reason})
			}
		}
	})
	return func() {
		sn.agent.CompareAndSwap(l.Agent, nil)
		cancel()
		for _, s := range servers {
			_ = s.Shutdown() // closes its listener
		}
		_ = ls.Close()
		wg.Wait()
	}, nil
}

// RefusalsFile is where a sandbox's own processes read what its policy
// refused lately (the newest last, a line each, as a command's result
// cites them): a program whose connection was reset, or whose lookup
// failed, finds the rule and the reason there instead of guessing.
const RefusalsFile = "/var/log/hutch/network-refusals.log"

// refusalsKept is how many refusals RefusalsFile holds.
const refusalsKept = 100

// tellDelay gathers the refusals of a burst into one write.
const tellDelay = 100 * time.Millisecond

// tell writes sandbox id's latest refusals to RefusalsFile in it, soon,
// through its agent, unless a write is due already.
func (p *Plane) tell(id string, sn *sandboxNet) {
	if !sn.told.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(tellDelay, func() {
		sn.told.Store(false)
		agent := sn.agent.Load()
		if agent == nil {
			return // it does not run: the next refusal, once it does, writes them
		}
		last := sn.events.Last()
		evs, _ := sn.events.After(max(last, refusalsKept) - refusalsKept)
		var b strings.Builder
		for _, ev := range evs {
			fmt.Fprintf(&b, "%s %s\n", ev.Time.Format(time.RFC3339), ev.Line())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := agent.WriteFile(ctx, RefusalsFile, "root", strings.NewReader(b.String())); err != nil {
			p.log.Debug("write the sandbox's refusals file", attrSandbox, id, "error", err)
		}
	})
}

// Set changes a sandbox's network policy: its next connections and
// lookups are decided by pol, running or not, without a restart.
func (p *Plane) Set(ctx context.Context, id string, pol netpolicy.Policy) error {
	checker, err := netpolicy.Compile(pol)
	if err != nil {
		return errdefs.InvalidArgument("network: %v", err)
	}
	rec, err := p.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if rec.State == store.Deleting {
		return errdefs.Conflict("sandbox %s is being deleted", id)
	}
	if err := p.cfg.Store.SetNetwork(ctx, id, pol, p.cfg.Now().UTC()); err != nil {
		return err
	}
	// Made now if the sandbox has none yet: a resume racing with the
	// change finds it, and serves the new policy.
	p.netOf(id, pol).setPolicy(checker)
	if rec, err := p.cfg.Store.GetSandbox(ctx, id); err != nil || rec.State == store.Deleting {
		p.Deleted(id) // deleted meanwhile: nothing to keep
	}
	p.log.Info("network policy changed", attrSandbox, id, "mode", pol.Mode, "allow", len(pol.Allow), "deny", len(pol.Deny))
	return nil
}

// Events returns the log of a sandbox's refused connections and lookups.
func (p *Plane) Events(ctx context.Context, id string) (*netproxy.Log, error) {
	rec, err := p.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return &p.netOf(id, rec.Network).events, nil
}

// History returns a sandbox's network log: its latest connections and
// lookups, each with the rule that decided it.
func (p *Plane) History(ctx context.Context, id string) (*netproxy.History, error) {
	rec, err := p.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return &p.netOf(id, rec.Network).history, nil
}

// Proposal is the smallest allow-list that would have let through every
// connection sandbox id made while its mode was learn (or, if it never
// was, those its log still has): its destinations as name:port rules
// (address:port where no name was read), ready to set on it or on
// another sandbox.
func (p *Plane) Proposal(ctx context.Context, id string) (netpolicy.Policy, error) {
	h, err := p.History(ctx, id)
	if err != nil {
		return netpolicy.Policy{}, err
	}
	allow := h.Reached()
	slices.Sort(allow)
	pol := netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: allow}
	if len(allow) > netpolicy.MaxRules {
		return netpolicy.Policy{}, errdefs.FailedPrecondition("sandbox %s reached %d destinations, more than the %d rules a policy holds: allow it mode full, or wildcards of its hosts' domains", id, len(allow), netpolicy.MaxRules)
	}
	if _, err := netpolicy.Compile(pol); err != nil {
		return netpolicy.Policy{}, fmt.Errorf("the proposal of sandbox %s does not compile: %w", id, err)
	}
	return pol, nil
}

// Log is the log of what sandbox id's policy refused, or nil if it has no
// network served.
func (p *Plane) Log(id string) *netproxy.Log {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sn := p.nets[id]; sn != nil {
		return &sn.events
	}
	return nil
}

// Counters are what a sandbox's connections carried since the daemon
// started.
type Counters struct {
	BytesOut, BytesIn, Connections int64
}

// Counters returns sandbox id's counters (zero if it has no network state
// yet).
func (p *Plane) Counters(id string) Counters {
	p.mu.Lock()
	sn := p.nets[id]
	p.mu.Unlock()
	if sn == nil {
		return Counters{}
	}
	return sn.counters()
}

func (sn *sandboxNet) counters() Counters {
	return Counters{BytesOut: sn.proxy.BytesOut.Load(), BytesIn: sn.proxy.BytesIn.Load(), Connections: sn.proxy.Connections.Load()}
}

func (c Counters) plus(d Counters) Counters {
	return Counters{BytesOut: c.BytesOut + d.BytesOut, BytesIn: c.BytesIn + d.BytesIn, Connections: c.Connections + d.Connections}
}

// Refusal is a kind of refusal, as the daemon's metrics count them: Kind
// is the event's ("dns", "tcp", "udp"), By what refused it: "mode" (the
// sandbox's mode leaves it out), "always" (no policy allows it) or
// "rule" (one of the policy's own rules).
type Refusal struct{ Kind, By string }

func (p *Plane) countRefusal(ev netproxy.Event) {
	by := ev.Rule
	if by != "mode" && by != "always" {
		by = "rule"
	}
	p.mu.Lock()
	p.refusals[Refusal{Kind: ev.Kind, By: by}]++
	p.mu.Unlock()
}

// Totals is what every sandbox's connections carried, and what their
// policies refused, since the daemon started: counters that only grow.
func (p *Plane) Totals() (Counters, map[Refusal]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sum := p.gone
	for _, sn := range p.nets {
		sum = sum.plus(sn.counters())
	}
	return sum, maps.Clone(p.refusals)
}

// Default is the policy of a sandbox created without one.
func (p *Plane) Default() netpolicy.Policy { return p.cfg.Default }

// checkNetwork fills in and checks a create's network policy.
func (p *Plane) checkNetwork(pol *netpolicy.Policy, ceiling netpolicy.Mode) (netpolicy.Policy, error) {
	if pol == nil {
		if ceiling != "" && !p.cfg.Default.Mode.AtMost(ceiling) {
			return netpolicy.Policy{Mode: ceiling}, nil
		}
		return p.cfg.Default, nil
	}
	if _, err := netpolicy.Compile(*pol); err != nil {
		return netpolicy.Policy{}, errdefs.InvalidArgument("network: %v", err)
	}
	if ceiling != "" && !pol.Mode.AtMost(ceiling) {
		return netpolicy.Policy{}, errdefs.PermissionDenied("network mode %s is more than this key allows: its sandboxes may have mode %s at most", pol.Mode, ceiling)
	}
	return *pol, nil
}

// withDefaults fills in the default policy and how the daemon reaches the
// outside.
func (c Config) withDefaults() Config {
	if c.Default.Mode == "" {
		c.Default.Mode = netpolicy.Full
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.Lookup == nil {
		c.Lookup = net.DefaultResolver.LookupNetIP
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
