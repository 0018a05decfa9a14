package jupyter

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
)

// signatureScheme is the only scheme this package signs with and accepts:
// the one jupyter_client writes by default.
const signatureScheme = "hmac-sha256"

// ConnectionInfo is a kernel's connection file: where its five sockets
// listen and the key that signs every message. The JSON names are those
// jupyter_client writes and kernels read.
type ConnectionInfo struct {
	IP              string `json:"ip"`
	Transport       string `json:"transport"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// NewConnectionInfo returns a connection for a kernel on 127.0.0.1: five
// free TCP ports and a fresh random key for HMAC-SHA256.
//
// The ports are free when chosen, not reserved: they are released for the
// kernel to bind, so another process could take one in between (as with
// jupyter_client). The kernel then fails to start, which the caller sees as
// Dial or WaitReady running out of time.
func NewConnectionInfo() (ConnectionInfo, error) {
	ports, err := freePorts(5)
	if err != nil {
		return ConnectionInfo{}, err
	}
	key := make([]byte, 32)
	rand.Read(key)
	return ConnectionInfo{
		IP:              "127.0.0.1",
		Transport:       "tcp",
		ShellPort:       ports[0],
		IOPubPort:       ports[1],
		StdinPort:       ports[2],
		ControlPort:     ports[3],
		HBPort:          ports[4],
		Key:             hex.EncodeToString(key),
		SignatureScheme: signatureScheme,
	}, nil
}

// freePorts returns n distinct free loopback ports. Every listener stays
// open until all are chosen, so the system cannot hand out one port twice.
func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("find a free port: unexpected address %v", l.Addr())
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}

// WriteFile writes the connection file for a kernel that runs as uid:gid
// (-1 leaves the agent's own, as with os.Chown). The file holds the signing
// key, so it is mode 0600 and owned by the kernel's user, who must read it.
//
// path must not exist yet: the agent runs as root and the directory may be
// writable by the kernel's user, so an existing file or symbolic link there
// is refused rather than followed or overwritten.
func (ci ConnectionInfo) WriteFile(path string, uid, gid int) (err error) {
	data, err := json.MarshalIndent(ci, "", "  ")
	if err != nil {
		return fmt.Errorf("encode connection file: %w", err)
	}
	// #nosec G304 -- the caller's path; O_EXCL refuses anything already there
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write connection file: %w", err)
	}
	defer func() {
		err = errors.Join(err, f.Close())
		if err != nil {
			_ = os.Remove(path)
			err = fmt.Errorf("write connection file %s: %w", path, err)
		}
	}()
	if err := f.Chown(uid, gid); err != nil {
		return err
	}
	_, err = f.Write(data)
	return err
}
