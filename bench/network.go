package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/egress"
	"github.com/hutchdev/hutch/internal/net/nettest"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
)

// measureNetwork is row (h), a sandbox's network:
//
//   - create → first output with network mode full against none, under
//     each runtime (every sandbox has its router namespace; full only
//     lets its connections through), and what that plumbing costs on its
//     own (router namespace, veth, nftables, the daemon's listeners);
//   - one 256 MiB HTTP download from a host of a test internet
//     (internal/net/nettest, in a namespace of the bench's own) by curl in a
//     sandbox of mode full, through the daemon's proxy, against the same
//     download by the same curl between two plain network namespaces
//     joined by a veth pair.
func (b *bench) measureNetwork(ctx context.Context) (_ section, err error) {
	var rows []row
	var results []result
	runtimes := []string{"runc"}
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		runtimes = append(runtimes, "gvisor")
	}
	for _, rt := range runtimes {
		n := b.cfg.createN
		if rt == "gvisor" {
			n = b.cfg.gvisorN
		}
		mode := func(m string) *peer {
			return &peer{name: rt + " " + m, run: func(ctx context.Context) (time.Duration, error) {
				_, first, err := createWith(ctx, b.d.client, client.CreateSandboxRequest{Runtime: rt, Network: &client.NetworkPolicy{Mode: m}})
				return first, err
			}}
		}
		full, none := mode(client.NetworkFull), mode(client.NetworkNone)
		if err := b.interleave(ctx, "(h) create, "+rt+", full and none", n, full, none); err != nil {
			return section{}, err
		}
		extra := median(full.samples) - median(none.samples)
		rows = append(rows,
			durationRow(rt+": create + exec echo, network full", full.samples),
			durationRow(rt+": create + exec echo, network none", none.samples),
			row{label: "  full − none", median: fmtDuration(extra), target: target(extra <= 5*time.Millisecond, "≤ 5 ms")},
		)
		results = append(results, result{ID: "h/full-" + rt, Topic: topicNetwork,
			What:  "create → first output with mode `full`, " + runtimeName(rt),
			Hutch: deltaFig("", extra), Peers: []figure{durationFig("the same with mode `none`", median(none.samples))},
			Ratio: []term{targetTerm(extra <= 5*time.Millisecond, "≤ 5 ms")}})
	}
	plumbing, err := b.networkPlumbing(ctx, b.cfg.createN)
	if err != nil {
		return section{}, err
	}
	rows = append(rows, durationRow("every create: router namespace, veth, nftables, listeners", plumbing))
	results = append(results, result{ID: "h/plumbing", Topic: topicNetwork,
		What:  "what the network adds to every create (router namespace, veth, nftables, the daemon's listeners)",
		Hutch: durationFig("", median(plumbing))})

	through, veth, relayed, err := b.downloads(ctx)
	if err != nil {
		return section{}, err
	}
	mbps := func(d []time.Duration) []float64 { return rates(nettestBig, d) }
	r := ratio(median(mbps(through)), median(mbps(veth)))
	floor := ratio(median(mbps(relayed)), median(mbps(veth)))
	toFloor := ratio(median(mbps(through)), median(mbps(relayed)))
	rows = append(rows,
		rateRow("256 MiB download through the policy (runc sandbox, full)", mbps(through)),
		rateRow("the same between two namespaces joined by a veth", mbps(veth)),
		rateRow("the same over that veth through a bare relay (floor)", mbps(relayed)),
		row{label: "ratio through the policy / veth", median: fmtRatio(r), target: target(r >= 0.5, "≥ 0.5× veth")},
		row{label: "  the floor: bare relay / veth", median: fmtRatio(floor)},
		row{label: "  through the policy / bare relay", median: fmtRatio(toFloor)},
	)
	results = append(results, result{ID: "h/download", Topic: topicNetwork,
		What:  "one 256 MiB download by curl in a runc sandbox (mode `full`) from a host of a test internet",
		Hutch: rateFig("", median(mbps(through))),
		Peers: []figure{
			rateFig("the same curl over a plain veth", median(mbps(veth))),
			rateFig("over that veth through a bare relay splicing as the proxy does, no policy, no sandbox", median(mbps(relayed))),
		},
		Ratio: []term{ratioTerm(r, "the veth").with(r >= 0.5, "≥ 0.5×"), ratioTerm(toFloor, "the bare relay")}})
	return section{title: "(h) network", rows: rows, results: results}, nil
}

// runtimeName is a runtime as the docs name it: runc, gVisor.
func runtimeName(rt string) string {
	if rt == "gvisor" {
		return "gVisor"
	}
	return rt
}

// nettestBig is the size of the test internet's /big.
const nettestBig = 256 << 20

// rates are the throughputs in MB/s of moving size bytes in each of d.
func rates(size int, d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(size) / v.Seconds() / 1e6
	}
	return out
}

// rateRow is the row of a throughput in MB/s.
func rateRow(label string, v []float64) row {
	return row{label: label, median: fmt.Sprintf("%.0f MB/s", median(v)), p90: fmt.Sprintf("%.0f MB/s", p90(v)), n: strconv.Itoa(len(v))}
}

// networkPlumbing times what every create adds for the network: the
// router namespace with its rules, the sandbox's namespace and the veth
// between them (as for gVisor, which is the more of the two), and the
// daemon's listeners. Removing them is not timed.
func (b *bench) networkPlumbing(ctx context.Context, n int) ([]time.Duration, error) {
	dir := filepath.Join(b.dir, "netns")
	var samples []time.Duration
	for i := range b.cfg.warmup + n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id := "p" + strconv.Itoa(i)
		start := time.Now()
		sn, err := sandboxnet.Create(dir, id, true)
		if err != nil {
			return nil, err
		}
		ls, err := sn.Listen()
		d := time.Since(start)
		if err == nil {
			err = ls.Close()
		}
		if err := errors.Join(err, sn.Remove()); err != nil {
			return nil, err
		}
		if i >= b.cfg.warmup {
			samples = append(samples, d)
		}
	}
	return samples, os.Remove(dir)
}

// downloads times 256 MiB downloads by curl: in a runc sandbox of a daemon
// connecting from a test internet, through its policy (mode full);
// between two namespaces joined by a veth pair, from the same server code;
// and over that veth through a bare relay beside the server, which
// splices the two connections as the daemon's proxy does, with no policy
// and no sandbox: the floor of any proxy that ends the sandbox's
// connection and makes its own (as the design has: the daemon decides the
// name and dials), on this host.
func (b *bench) downloads(ctx context.Context) (through, veth, relayed []time.Duration, err error) {
	base := filepath.Join(b.dir, "net")
	if err := os.Mkdir(base, 0o711); err != nil {
		return nil, nil, nil, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(base)) }()
	in, err := nettest.New(filepath.Join(base, "internet"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("test internet: %w", err)
	}
	defer func() { err = errors.Join(err, in.Close()) }()
	if err := os.Mkdir(filepath.Join(base, "daemon"), 0o711); err != nil {
		return nil, nil, nil, err
	}
	d, err := startDaemon(ctx, b.cfg.hutch, b.runsc, filepath.Join(base, "daemon"), "--pool", "base=0",
		"--network-netns", in.Netns, "--network-dns", in.DNS, "--runtime", "runc")
	if d != nil {
		defer func() { err = errors.Join(err, cleanup(ctx, d.deleteAll), d.stop()) }()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	// With the host's CPUs, as the peer's curl has: the row is about the
	// way the bytes go, not the sandbox's CPU limit (1 by default).
	sb, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc", CPUs: float64(runtime.NumCPU()), Network: &client.NetworkPolicy{Mode: client.NetworkFull}})
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() { err = errors.Join(err, deleteSandbox(ctx, d.client, sb.ID)) }()
	pair, err := newVethPair(filepath.Join(base, "a"), filepath.Join(base, "b"))
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() { err = errors.Join(err, pair.close()) }()

	const curl = "curl -sS -o /dev/null -w %{time_total} "
	sandboxPeer := &peer{name: "through the policy", run: func(ctx context.Context) (time.Duration, error) {
		res, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: curl + "http://other.test/big"})
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("curl in the sandbox: %+v", res)
		}
		return parseSeconds(res.Stdout)
	}}
	vethPeer := &peer{name: "veth", run: func(ctx context.Context) (time.Duration, error) {
		out, err := exec.CommandContext(ctx, "nsenter", "--net="+pair.client, "sh", "-c", curl+"http://"+pair.serverAddr+"/big").Output()
		if err != nil {
			return 0, fmt.Errorf("curl over the veth: %w", err)
		}
		return parseSeconds(string(out))
	}}
	relayPeer := &peer{name: "bare relay", run: func(ctx context.Context) (time.Duration, error) {
		out, err := exec.CommandContext(ctx, "nsenter", "--net="+pair.client, "sh", "-c", curl+"http://"+pair.relayAddr+"/big").Output()
		if err != nil {
			return 0, fmt.Errorf("curl through the bare relay: %w", err)
		}
		return parseSeconds(string(out))
	}}
	if err := b.interleave(ctx, "(h) 256 MiB download", 7, sandboxPeer, vethPeer, relayPeer); err != nil {
		return nil, nil, nil, err
	}
	return sandboxPeer.samples, vethPeer.samples, relayPeer.samples, nil
}

// parseSeconds reads curl's %{time_total}.
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("curl's time: %q", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// vethPair is two network namespaces joined by a veth pair, an HTTP server
// in one (serving /big as the test internet does), for the other's curl,
// and beside it a bare relay to it (relayAddr).
type vethPair struct {
	client, server        string // namespace paths
	serverAddr, relayAddr string
	srv                   *http.Server
	relay                 net.Listener
	done, relayDone       chan struct{}
}

func newVethPair(clientNS, serverNS string) (_ *vethPair, err error) {
	p := &vethPair{client: clientNS, server: serverNS, serverAddr: "10.98.0.2:80", relayAddr: "10.98.0.2:81",
		done: make(chan struct{}), relayDone: make(chan struct{})}
	up := func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}
	if err := sandboxnet.NewNamespace(serverNS, up); err != nil {
		return nil, err
	}
	if err := sandboxnet.NewNamespace(clientNS, up); err != nil {
		return nil, errors.Join(err, sandboxnet.RemoveNamespace(serverNS))
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.close())
		}
	}()
	serverFd, err := os.Open(serverNS)
	if err != nil {
		return nil, err
	}
	defer serverFd.Close()
	err = sandboxnet.InNetns(clientNS, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va"}, PeerName: "vb", PeerNamespace: netlink.NsFd(int(serverFd.Fd()))}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		return addrUp("va", netip.MustParsePrefix("10.98.0.1/24"))
	})
	if err != nil {
		return nil, fmt.Errorf("veth: %w", err)
	}
	var ln net.Listener
	err = sandboxnet.InNetns(serverNS, func() error {
		if err := addrUp("vb", netip.MustParsePrefix("10.98.0.2/24")); err != nil {
			return err
		}
		if ln, err = net.Listen("tcp", p.serverAddr); err != nil {
			return err
		}
		p.relay, err = net.Listen("tcp", p.relayAddr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(nettestBig))
		_, _ = io.CopyN(w, zeroReader{}, nettestBig)
	})}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	go func() {
		defer close(p.relayDone)
		p.serveRelay()
	}()
	return p, nil
}

// serveRelay relays each connection to the relay to the server, dialled
// from the server's namespace, with the daemon proxy's splice.
func (p *vethPair) serveRelay() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := p.relay.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			var up net.Conn
			err := sandboxnet.InNetns(p.server, func() (err error) {
				up, err = net.Dial("tcp", p.serverAddr)
				return err
			})
			if err != nil {
				c.Close()
				return
			}
			egress.Splice(context.Background(), c, up, nil)
		})
	}
}

// addrUp gives link name of the calling thread's namespace address a, up.
func addrUp(name string, a netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), 32)}}); err != nil {
		return err
	}
	return netlink.LinkSetUp(link)
}

func (p *vethPair) close() error {
	var err error
	if p.srv != nil {
		err = p.srv.Close()
		<-p.done
	}
	if p.relay != nil {
		err = errors.Join(err, p.relay.Close())
		<-p.relayDone
	}
	return errors.Join(err, sandboxnet.RemoveNamespace(p.client), sandboxnet.RemoveNamespace(p.server))
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
