package netproxy

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// OriginalDst returns where a TCP connection redirected by netfilter (nat
// redirect or dnat) was going: conntrack's SO_ORIGINAL_DST, asked in the
// network namespace the connection was accepted in (the socket's own).
func OriginalDst(conn net.Conn) (netip.AddrPort, error) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("original destination: not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		// sockaddr_in fits the 20 bytes of an ipv6_mreq: family (2),
		// port (2, big-endian), address (4).
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := m.Multiaddr[:]
		port := binary.BigEndian.Uint16(b[2:4])
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, &net.OpError{Op: "original destination", Net: "tcp", Err: err}
	}
	return dst, nil
}
