package sandboxnet

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/net/netproxy"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
}

// What a sandbox sends goes nowhere but to the daemon's listeners in its
// router namespace: any TCP connection to the proxy, with its original
// destination readable there; DNS to any server to the resolver; other
// UDP, and TCP straight to the proxy's port, refused at once. Removed, it
// leaves no namespace and no mount.
func TestSandboxTrafficReachesOnlyTheDaemon(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	n, err := Create(dir, "sb1", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Remove() })
	l, err := n.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()

	origs := make(chan netip.AddrPort, 4)
	go func() {
		for {
			c, err := l.Proxy.Accept()
			if err != nil {
				return
			}
			orig, err := netproxy.OriginalDst(c)
			if err != nil {
				t.Errorf("original destination: %v", err)
			}
			origs <- orig
			_, _ = c.Write([]byte("from the daemon"))
			_ = c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			k, from, err := l.DNSUDP.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = l.DNSUDP.WriteTo(append([]byte("answer to "), buf[:k]...), from)
		}
	}()

	for _, dest := range []string{"203.0.113.5:80", "198.51.100.7:22", "10.0.2.2:8080", "127.0.0.53:443"} {
		var got []byte
		err := InNetns(n.Sandbox, func() error {
			c, err := net.DialTimeout("tcp4", dest, 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			got, err = io.ReadAll(c)
			return err
		})
		if dest == "127.0.0.53:443" {
			// The sandbox's own loopback stays its own.
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("connect to the sandbox's loopback: %v, want refused by its own kernel", err)
			}
			continue
		}
		if err != nil || string(got) != "from the daemon" {
			t.Fatalf("connect to %s from the sandbox: %q, %v", dest, got, err)
		}
		if orig := <-origs; orig.String() != dest {
			t.Errorf("original destination %s, want %s", orig, dest)
		}
	}

	for _, server := range []string{"8.8.8.8:53", "10.0.2.2:53"} {
		var got []byte
		err := InNetns(n.Sandbox, func() error {
			c, err := net.Dial("udp4", server)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.Write([]byte("query")); err != nil {
				return err
			}
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 512)
			k, err := c.Read(buf)
			got = buf[:k]
			return err
		})
		if err != nil || string(got) != "answer to query" {
			t.Errorf("DNS to %s from the sandbox: %q, %v", server, got, err)
		}
	}

	// Refused at once, not left to time out.
	err = InNetns(n.Sandbox, func() error {
		c, err := net.Dial("udp4", "203.0.113.5:443")
		if err != nil {
			return err
		}
		defer c.Close()
		_, _ = c.Write([]byte("quic"))
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 16))
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("UDP other than DNS: %v, want refused", err)
	}
	// ... and told to the daemon.
	refused := make(chan []netip.AddrPort, 1)
	go func() {
		dests, _ := l.RefusedUDP.Read()
		refused <- dests
	}()
	select {
	case dests := <-refused:
		if want := netip.MustParseAddrPort("203.0.113.5:443"); !slices.Contains(dests, want) {
			t.Errorf("refused datagrams told: %v, want %v", dests, want)
		}
	case <-time.After(5 * time.Second):
		t.Error("the refused datagram was not told to the daemon")
	}
	err = InNetns(n.Sandbox, func() error {
		c, err := net.DialTimeout("tcp4", "10.0.2.2:15001", 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("TCP straight to the proxy port: %v, want refused", err)
	}

	// No IPv6 on the link; loopback keeps ::1.
	if err := InNetns(n.Sandbox, func() error {
		for _, name := range []string{SandboxIface, "lo"} {
			link, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			v6, err := netlink.AddrList(link, netlink.FAMILY_V6)
			if err != nil {
				return err
			}
			if name == SandboxIface && len(v6) != 0 || name == "lo" && len(v6) != 1 {
				t.Errorf("IPv6 addresses of %s: %v", name, v6)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Remove(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, dir)
}

// A runtime that makes the sandbox's namespace itself (runc) gets it linked
// after it made it; a namespace made again (runc's next start) is linked
// again, and so is one whose address was taken away (gVisor's copy).
func TestAttachIsRepeatable(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	n, err := Create(dir, "sb2", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Remove() })
	if found, ok := Find(dir, "sb2"); !ok || found.Router != n.Router || found.Sandbox != "" {
		t.Fatalf("Find: %+v, %v", found, ok)
	}
	l, err := n.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Proxy.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("ok"))
			_ = c.Close()
		}
	}()
	reach := func(ns string) error {
		return InNetns(ns, func() error {
			c, err := net.DialTimeout("tcp4", "203.0.113.9:443", 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			got, err := io.ReadAll(c)
			if err == nil && string(got) != "ok" {
				err = errors.New("answer " + string(got))
			}
			return err
		})
	}

	for round := range 2 {
		// The runtime's namespace, as runc makes one.
		ns := filepath.Join(t.TempDir(), "runtime-ns")
		if err := NewNamespace(ns, loopbackUp); err != nil {
			t.Fatal(err)
		}
		if err := n.Attach(ns); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := n.Attach(ns); err != nil {
			t.Fatalf("round %d, again: %v", round, err)
		}
		if err := reach(ns); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// As gVisor leaves it.
		if err := InNetns(ns, func() error {
			link, err := netlink.LinkByName(SandboxIface)
			if err != nil {
				return err
			}
			addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
			if err != nil || len(addrs) != 1 {
				return errors.Join(err, errors.New("not one address"))
			}
			return netlink.AddrDel(link, &addrs[0])
		}); err != nil {
			t.Fatal(err)
		}
		if err := reach(ns); err == nil {
			t.Fatal("reached out without an address")
		}
		if err := n.Attach(ns); err != nil {
			t.Fatal(err)
		}
		if err := reach(ns); err != nil {
			t.Fatalf("round %d, after the address came back: %v", round, err)
		}
		if err := RemoveNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove(dir, "sb2"); err != nil {
		t.Fatal(err)
	}
	assertGone(t, dir)
}

// A create that fails half-way leaves nothing.
func TestFailedCreateLeavesNothing(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	// The sandbox namespace's file is taken: the create fails there,
	// after the router namespace was made.
	_, sandbox := paths(dir, "sb3")
	if err := os.WriteFile(sandbox, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, "sb3", true); err == nil {
		t.Fatal("create over a taken namespace file succeeded")
	}
	if err := os.Remove(sandbox); err != nil {
		t.Fatal(err)
	}
	assertGone(t, dir)
}

// assertGone checks that dir holds no namespace file and no mount.
func assertGone(t *testing.T, dir string) {
	t.Helper()
	if ids, err := List(dir); err != nil || len(ids) != 0 {
		t.Errorf("namespaces left: %v, %v", ids, err)
	}
	points, err := mountinfo.Under(dir)
	if err != nil || len(points) != 0 {
		t.Errorf("mounts left under %s: %v, %v", dir, points, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 0 {
		t.Errorf("files left: %s", strings.Join(names, ", "))
	}
}

// A router namespace forwards nothing, filters replies by the way their
// packets came and makes new links without IPv6; a sandbox's namespace
// makes them without IPv6 too. (A new namespace starts with rp_filter and
// disable_ipv6 off, so these are written, not only read.)
func TestNamespaceSettings(t *testing.T) {
	needRoot(t)
	n, err := Create(t.TempDir(), "sb1", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Remove() })
	read := func(ns, name string) string {
		t.Helper()
		var v []byte
		err := InNetns(ns, func() (err error) {
			v, err = os.ReadFile(filepath.Join("/proc/sys/net", name))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(v))
	}
	for ns, want := range map[string]map[string]string{
		n.Router:  {"ipv4/ip_forward": "0", "ipv4/conf/all/rp_filter": "1", "ipv4/conf/default/rp_filter": "1", "ipv6/conf/default/disable_ipv6": "1"},
		n.Sandbox: {"ipv6/conf/default/disable_ipv6": "1"},
	} {
		for name, v := range want {
			if got := read(ns, name); got != v {
				t.Errorf("%s in %s: %s, want %s", name, filepath.Base(ns), got, v)
			}
		}
	}
}
