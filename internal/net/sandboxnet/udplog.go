package sandboxnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The router's rules refuse UDP other than DNS in the kernel, with a port
// unreachable at once, where no listener of the daemon sees it. So that
// each such refusal is an event all the same, the rule before the refusal
// copies the datagram's headers to an NFLOG group, at most udpLogRate a
// second, and the daemon reads them in the router namespace
// (UDPRefusals). NFLOG groups belong to a network namespace: each router
// has its own group udpLogGroup.

const (
	// udpLogGroup is the NFLOG group of refused datagrams in a router.
	udpLogGroup = 7
	// udpLogSnap is how much of a refused datagram is logged: an IPv4
	// header with options (60 bytes at most) and the UDP ports.
	udpLogSnap = 64
	// udpLogRate is how many refusals a second a router logs at most (as
	// many again in a burst); what is beyond is refused all the same.
	udpLogRate = 20
)

// nfnetlink_log's protocol (linux/netfilter/nfnetlink_log.h), which
// x/sys/unix does not name.
const (
	nfnlSubsysULOG   = 4
	nfulnlMsgPacket  = 0
	nfulnlMsgConfig  = 1
	nfulaPayload     = 9
	nfulaCfgCmd      = 1
	nfulaCfgMode     = 2
	nfulnlCfgCmdBind = 1
	nfulnlCopyPacket = 2
)

// logRefusedUDP is the rule's part that logs what it matched (see above).
func logRefusedUDP() []expr.Any {
	return []expr.Any{
		&expr.Limit{Type: expr.LimitTypePkts, Rate: udpLogRate, Unit: expr.LimitTimeSecond, Burst: udpLogRate},
		&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_SNAPLEN, Group: udpLogGroup, Snaplen: udpLogSnap},
	}
}

// UDPRefusals reads the datagrams a router refused.
type UDPRefusals struct {
	conn *netlink.Conn
}

// listenUDPRefusals binds to the NFLOG group of the router namespace ns.
func listenUDPRefusals(ns int) (_ *UDPRefusals, err error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns})
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer func() {
		if err != nil {
			_ = conn.Close()
		}
	}()
	mode := make([]byte, 6) // struct nfulnl_msg_config_mode
	binary.BigEndian.PutUint32(mode, udpLogSnap)
	mode[4] = nfulnlCopyPacket
	for _, attr := range []netlink.Attribute{
		{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}},
		{Type: nfulaCfgMode, Data: mode},
	} {
		if err := configure(conn, attr); err != nil {
			return nil, fmt.Errorf("bind NFLOG group %d: %w", udpLogGroup, err)
		}
	}
	return &UDPRefusals{conn: conn}, nil
}

// configure sends one NFULNL_MSG_CONFIG for the group and waits for its ack.
func configure(conn *netlink.Conn, attr netlink.Attribute) error {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{attr})
	if err != nil {
		return err
	}
	// struct nfgenmsg: family, version, the group as res_id.
	head := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}
	binary.BigEndian.PutUint16(head[2:], udpLogGroup)
	_, err = conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysULOG<<8 | nfulnlMsgConfig), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(head, attrs...),
	})
	return err
}

// Read waits for refused datagrams and returns where each was sent. It
// fails once Close was called.
func (u *UDPRefusals) Read() ([]netip.AddrPort, error) {
	for {
		msgs, err := u.conn.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			continue // they came faster than they were read: some are lost
		}
		if err != nil {
			return nil, err
		}
		var dests []netip.AddrPort
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(nfnlSubsysULOG<<8|nfulnlMsgPacket) || len(m.Data) < 4 {
				continue
			}
			if d, ok := refusedDest(m.Data[4:]); ok {
				dests = append(dests, d)
			}
		}
		if len(dests) > 0 {
			return dests, nil
		}
	}
}

// Close stops reading; a Read under way returns an error.
func (u *UDPRefusals) Close() error { return u.conn.Close() }

// refusedDest is the destination of the IPv4 UDP datagram in a packet
// message's attributes.
func refusedDest(attrs []byte) (netip.AddrPort, bool) {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return netip.AddrPort{}, false
	}
	for ad.Next() {
		if ad.Type() == nfulaPayload {
			return udpDest(ad.Bytes())
		}
	}
	return netip.AddrPort{}, false
}

// udpDest reads the destination of an IPv4 UDP datagram from its headers.
func udpDest(p []byte) (netip.AddrPort, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_UDP {
		return netip.AddrPort{}, false
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+4 {
		return netip.AddrPort{}, false
	}
	addr := netip.AddrFrom4([4]byte(p[16:20]))
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(p[ihl+2:])), true
}
