package sandboxnet

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table in each router namespace.
const TableName = "hutch"

// applyRules loads the router namespace's ruleset, the same for every
// sandbox whatever its policy (the daemon decides each connection):
//
//	table inet hutch {
//	  chain pre { type nat hook prerouting priority dstnat; policy accept;
//	    udp dport 53 redirect to :53
//	    tcp dport 53 redirect to :53
//	    meta l4proto tcp redirect to :15001 }
//	  chain refuse { type filter hook prerouting priority dstnat + 1; policy accept;
//	    udp dport != 53 limit rate 20/second burst 20 packets log group 7 snaplen 64
//	    udp dport != 53 reject with icmpx port-unreachable }
//	  chain in { type filter hook input priority filter; policy drop;
//	    iifname "lo" accept
//	    ct state established,related accept
//	    udp dport 53 accept
//	    tcp dport 53 accept
//	    ct status dnat tcp dport 15001 accept
//	    meta l4proto tcp reject with tcp reset }
//	  chain fwd { type filter hook forward priority filter; policy drop; }
//	}
//
// A query sent to 10.0.2.2:53 itself is "redirected" to the same address,
// which sets no DNAT status, so DNS is accepted either way; the proxy port
// only for redirected connections, so that the proxy always has an
// original destination. What is refused is told at once (a reset, a port
// unreachable) rather than left to time out; UDP is refused in prerouting,
// since a datagram to an outside address never reaches input (nothing is
// forwarded, and the kernel drops it at routing without a word), and
// logged for the daemon's events first (see UDPRefusals).
func applyRules(router string) error {
	ns, err := openNS(router)
	if err != nil {
		return err
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName})
	accept, drop := nftables.ChainPolicyAccept, nftables.ChainPolicyDrop
	pre := c.AddChain(&nftables.Chain{Name: "pre", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	in := c.AddChain(&nftables.Chain{Name: "in", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	refuse := c.AddChain(&nftables.Chain{Name: "refuse", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest + 1), Policy: &accept})
	c.AddChain(&nftables.Chain{Name: "fwd", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})

	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}
	rule(pre, proto(unix.IPPROTO_UDP), dport(DNSPort), redirect(DNSPort))
	rule(pre, proto(unix.IPPROTO_TCP), dport(DNSPort), redirect(DNSPort))
	rule(pre, proto(unix.IPPROTO_TCP), redirect(ProxyPort))

	rule(in, iifname("lo"), verdict(expr.VerdictAccept))
	rule(in, ctBits(expr.CtKeySTATE, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictAccept))
	rule(in, proto(unix.IPPROTO_UDP), dport(DNSPort), verdict(expr.VerdictAccept))
	rule(in, proto(unix.IPPROTO_TCP), dport(DNSPort), verdict(expr.VerdictAccept))
	rule(in, ctBits(expr.CtKeySTATUS, ipsDstNAT), proto(unix.IPPROTO_TCP), dport(ProxyPort), verdict(expr.VerdictAccept))
	rule(in, proto(unix.IPPROTO_TCP), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})
	rule(refuse, proto(unix.IPPROTO_UDP), dportNot(DNSPort), logRefusedUDP())
	rule(refuse, proto(unix.IPPROTO_UDP), dportNot(DNSPort), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("load nftables rules: %w", err)
	}
	return nil
}

// ipsDstNAT is conntrack's IPS_DST_NAT status bit.
const ipsDstNAT = 1 << 5

// proto matches the packet's layer-4 protocol.
func proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// dport matches the TCP or UDP destination port (after proto).
func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(port)},
	}
}

// dportNot matches any other destination port (after proto).
func dportNot(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: be16(port)},
	}
}

// redirect sends the packet to port on the address it came in by.
func redirect(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: be16(port)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}

// iifname matches the interface the packet came in by.
func iifname(name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// ctBits matches a conntrack key (state or status) having any of bits.
func ctBits(key expr.CtKey, bits uint32) []expr.Any {
	mask := binary.NativeEndian.AppendUint32(nil, bits)
	return []expr.Any{
		&expr.Ct{Key: key, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
