// Package sandboxnet gives a sandbox its network, the same under runc and
// gVisor: an interface eth0 (10.0.2.100/24, default route via 10.0.2.2)
// whose other end, vr0 (10.0.2.2), is in a "router" network namespace the
// daemon makes for that sandbox alone. The router namespace has no other
// interface, no route out and forwards nothing: nftables there redirects
// every TCP connection to the daemon's proxy port and every DNS query to
// its resolver, both listening inside it (Listen), and refuses the rest. The
// daemon dials what its policy allows from its own namespace, so no packet
// of a sandbox is ever routed by the host's kernel.
//
//	sandbox namespace                 router namespace (one per sandbox)
//	  lo, eth0 10.0.2.100/24  ==veth==  vr0 10.0.2.2/24
//	  default via 10.0.2.2              TCP   → :15001 (the daemon's proxy)
//	                                    DNS   → :53    (the daemon's resolver)
//	                                    other → refused
//
// Every sandbox has the same addresses: each sits in its own router
// namespace, so they never meet, and a gVisor memory image restores into
// any sandbox (a fork) unchanged. IPv6 is off on the link; loopback keeps ::1.
//
// The namespaces are kept as files bind-mounted in the run dir (Dir), so a
// restarted daemon finds them, opens its listeners in them again and
// removes those of sandboxes it no longer has.
package sandboxnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The link and its addresses, the same in every sandbox.
const (
	SandboxIface = "eth0"
	RouterIface  = "vr0"
	// ProxyPort is where the router namespace sends a sandbox's TCP
	// connections; DNSPort where it sends its DNS queries.
	ProxyPort = 15001
	DNSPort   = 53
	mtu       = 1500
)

var (
	// SandboxAddr is the sandbox's address on eth0; RouterAddr its
	// gateway and nameserver.
	SandboxAddr = netip.MustParsePrefix("10.0.2.100/24")
	RouterAddr  = netip.MustParseAddr("10.0.2.2")
	sandboxMAC  = net.HardwareAddr{0x02, 0x00, 0x0a, 0x00, 0x02, 0x64}
	routerMAC   = net.HardwareAddr{0x02, 0x00, 0x0a, 0x00, 0x02, 0x02}
)

// Net is one sandbox's network: its router namespace, and its own
// namespace when the daemon made it (for gVisor, which copies a namespace
// it is given; runc makes its own, inside the sandbox's user namespace).
type Net struct {
	// Router is the router namespace's path; Sandbox the sandbox's
	// namespace's, or "" when the runtime makes it.
	Router, Sandbox string
}

// paths names the namespace files of sandbox id in dir.
func paths(dir, id string) (router, sandbox string) {
	return filepath.Join(dir, id+".router"), filepath.Join(dir, id+".sandbox")
}

// Create makes sandbox id's router namespace in dir, its rules and, with
// ownSandbox, the namespace the sandbox will run in (linked at once). On an
// error nothing is left.
func Create(dir, id string, ownSandbox bool) (n *Net, err error) {
	// #nosec G301 -- namespace files are root's and read-only
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create network namespace dir: %w", err)
	}
	router, sandbox := paths(dir, id)
	n = &Net{Router: router}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Remove())
		}
	}()
	if err := NewNamespace(router, setupRouter); err != nil {
		return n, fmt.Errorf("router namespace of sandbox %s: %w", id, err)
	}
	if err := applyRules(router); err != nil {
		return n, fmt.Errorf("router namespace of sandbox %s: %w", id, err)
	}
	if ownSandbox {
		if err := NewNamespace(sandbox, setupSandbox); err != nil {
			return n, fmt.Errorf("network namespace of sandbox %s: %w", id, err)
		}
		n.Sandbox = sandbox
		if err := n.Attach(sandbox); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Find returns sandbox id's network as a past Create left it in dir, and
// whether it has one.
func Find(dir, id string) (*Net, bool) {
	router, sandbox := paths(dir, id)
	if _, err := os.Stat(router); err != nil {
		return nil, false
	}
	n := &Net{Router: router}
	if _, err := os.Stat(sandbox); err == nil {
		n.Sandbox = sandbox
	}
	return n, true
}

// List returns the ids of the sandboxes that have a namespace in dir.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for _, e := range entries {
		id, _, ok := strings.Cut(e.Name(), ".")
		if ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Remove removes sandbox id's network from dir: RemoveNet of what Find finds.
func Remove(dir, id string) error {
	router, sandbox := paths(dir, id)
	return errors.Join(RemoveNamespace(sandbox), RemoveNamespace(router))
}

// Remove removes both namespaces; the link, the rules and the listeners'
// sockets go with the last holder of each. A missing part is fine.
func (n *Net) Remove() error {
	var errs []error
	if n.Sandbox != "" {
		errs = append(errs, RemoveNamespace(n.Sandbox))
	}
	return errors.Join(append(errs, RemoveNamespace(n.Router))...)
}

// setupRouter configures a new router namespace from inside: nothing is
// forwarded, IPv6 is off on the links made later, replies leave only by the
// way their packets came, and loopback is up (the listeners' replies to
// themselves). Loopback keeps ::1, as in the sandbox's namespace: turning
// IPv6 off on an existing interface takes the kernel's network-wide lock
// (see writeSysctls), and the router's loopback is reached only by the
// daemon.
func setupRouter() error {
	if err := writeSysctls([][2]string{
		{"ipv4/ip_forward", "0"},
		{"ipv4/conf/all/rp_filter", "1"},
		{"ipv4/conf/default/rp_filter", "1"},
		{"ipv6/conf/default/disable_ipv6", "1"},
	}); err != nil {
		return err
	}
	return loopbackUp()
}

// setupSandbox configures a new sandbox namespace from inside: loopback up
// (gVisor copies only what is up), and IPv6 off on the link made later.
func setupSandbox() error {
	if err := writeSysctls([][2]string{{"ipv6/conf/default/disable_ipv6", "1"}}); err != nil {
		return err
	}
	return loopbackUp()
}

// loopbackUp sets lo up in the calling thread's namespace.
func loopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// Attach links the sandbox namespace at path (its own, or /proc/PID/ns/net
// of a runc container made but not started) to the router namespace, and
// gives eth0 its address and default route. It does what is missing and
// can be called again: runc makes a new namespace at each start (the old
// link went with the old one), and gVisor takes eth0's address away each
// time it copies the namespace, so it runs before every start and restore.
func (n *Net) Attach(path string) error {
	sbFile, err := openNS(path)
	if err != nil {
		return err
	}
	defer sbFile.Close()
	router, err := handleAt(n.Router)
	if err != nil {
		return err
	}
	defer router.Close()
	sandbox, err := netlink.NewHandleAt(netns.NsHandle(int(sbFile.Fd())))
	if err != nil {
		return fmt.Errorf("netlink in sandbox namespace: %w", err)
	}
	defer sandbox.Close()

	if _, err := sandbox.LinkByName(SandboxIface); err != nil {
		if !isNotFound(err) {
			return fmt.Errorf("find %s: %w", SandboxIface, err)
		}
		// runc's namespace: lo is up, IPv6 is not yet off for the link.
		if n.Sandbox == "" {
			if err := InNetns(path, setupSandbox); err != nil {
				return err
			}
		}
		// A router end left by the previous namespace's link (it goes
		// with it, but the kernel may not have freed it yet).
		if old, err := router.LinkByName(RouterIface); err == nil {
			if err := router.LinkDel(old); err != nil {
				return fmt.Errorf("remove old %s: %w", RouterIface, err)
			}
		}
		veth := &netlink.Veth{
			LinkAttrs:        netlink.LinkAttrs{Name: RouterIface, HardwareAddr: routerMAC, MTU: mtu},
			PeerName:         SandboxIface,
			PeerHardwareAddr: sandboxMAC,
			PeerMTU:          mtu,
			PeerNamespace:    netlink.NsFd(int(sbFile.Fd())),
		}
		if err := router.LinkAdd(veth); err != nil {
			return fmt.Errorf("create the sandbox's link: %w", err)
		}
	}
	if err := addressUp(router, RouterIface, netip.PrefixFrom(RouterAddr, SandboxAddr.Bits())); err != nil {
		return err
	}
	if err := addressUp(sandbox, SandboxIface, SandboxAddr); err != nil {
		return err
	}
	eth, err := sandbox.LinkByName(SandboxIface)
	if err != nil {
		return fmt.Errorf("find %s: %w", SandboxIface, err)
	}
	gw := net.IP(RouterAddr.AsSlice())
	if err := sandbox.RouteReplace(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route of the sandbox: %w", err)
	}
	return nil
}

// addressUp gives the link name (in h's namespace) address a, and sets it up.
func addressUp(h *netlink.Handle, name string, a netip.Prefix) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), 32)}}
	if err := h.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("address of %s: %w", name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// handleAt opens a netlink handle in the namespace at path.
func handleAt(path string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", filepath.Base(path), err)
	}
	return h, nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// Listeners are the daemon's sockets in a sandbox's router namespace.
type Listeners struct {
	Proxy  net.Listener   // TCP, ProxyPort
	DNSUDP net.PacketConn // DNSPort
	DNSTCP net.Listener   // DNSPort
	// RefusedUDP tells the datagrams the router refused.
	RefusedUDP *UDPRefusals
}

// Close closes them all.
func (l *Listeners) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{l.Proxy, l.DNSUDP, l.DNSTCP} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if l.RefusedUDP != nil {
		errs = append(errs, l.RefusedUDP.Close())
	}
	return errors.Join(errs...)
}

// Listen opens the daemon's listeners in the router namespace. They take
// every address there: the namespace has none but vr0's and loopback.
func (n *Net) Listen() (*Listeners, error) {
	l := &Listeners{}
	err := InNetns(n.Router, func() error {
		var err error
		if l.Proxy, err = net.Listen("tcp4", ":"+strconv.Itoa(ProxyPort)); err != nil {
			return err
		}
		if l.DNSUDP, err = net.ListenPacket("udp4", ":"+strconv.Itoa(DNSPort)); err != nil {
			return err
		}
		l.DNSTCP, err = net.Listen("tcp4", ":"+strconv.Itoa(DNSPort))
		return err
	})
	if err == nil {
		err = l.listenRefusedUDP(n.Router)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("listen in router namespace: %w", err), l.Close())
	}
	return l, nil
}

func (l *Listeners) listenRefusedUDP(router string) error {
	ns, err := openNS(router)
	if err != nil {
		return err
	}
	defer ns.Close()
	l.RefusedUDP, err = listenUDPRefusals(int(ns.Fd()))
	return err
}
