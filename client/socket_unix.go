//go:build unix

package client

import "syscall"

// canConnect reports whether this process may connect to the unix socket at
// path (it needs write permission on it).
func canConnect(path string) bool {
	const wOK = 0x2
	return syscall.Access(path, wOK) == nil
}
