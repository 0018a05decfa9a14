package oci

// Host-wide id ranges.
//
// A user namespace's range must be no other sandbox's on the host, whichever
// daemon (data dir) or test made it: root in one range must be a stranger
// to every other sandbox's files. So ranges are claimed in one directory
// all of them share (DefaultIDRegistry), under a lock (flock) of that
// directory: a claim is a symlink named after the range's first host id,
// pointing at the sandbox directory that has it.
//
// A claim is good while its directory exists and is owned by the range's
// root, which is how a sandbox directory records its range anyway; a claim
// whose directory is gone or owned by another id (a daemon that died
// between the two steps, a data dir removed by hand) is stale, and the
// range is handed out again. Claims live on disk, not in /run: a suspended
// sandbox's files keep their owners across a reboot, and so must its range.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultIDRegistry is where every daemon on the host claims id ranges.
const DefaultIDRegistry = "/var/lib/hutch-ids"

// idAllocator hands out id ranges, host-wide, and keeps a user namespace of
// each range it handed out.
type idAllocator struct {
	registry string // the claims' directory
	// sandboxDir is this daemon's: ranges its sandboxes had before claims
	// existed are claimed for them the first time one is needed.
	sandboxDir string

	mu      sync.Mutex
	adopted bool
	// held are the ranges this allocator claimed and has not released:
	// take passes over them without reading their claims, one readlink and
	// one lstat each (with a thousand sandboxes, a millisecond or more of
	// every create).
	held map[uint32]bool
	// namespaces keeps a user namespace of each range handed out so far:
	// ranges are handed out again (the lowest free first), and making a
	// namespace costs a process (a millisecond or two).
	namespaces map[uint32]*os.File
}

// take claims the lowest free range for the sandbox whose directory is dir
// and makes dir its root's.
func (a *idAllocator) take(dir string) (idMapping, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	unlock, err := a.lock()
	if err != nil {
		return idMapping{}, err
	}
	defer unlock()
	if !a.adopted {
		if err := a.adoptExisting(); err != nil {
			return idMapping{}, err
		}
		a.adopted = true
	}
	for i := range uint32(idSlots) {
		m := idMapping{base: idBase + i*idRange}
		if a.held[m.base] {
			continue
		}
		claim := a.claimPath(m)
		if target, err := os.Readlink(claim); err == nil {
			if ownedBy(target, m) {
				continue
			}
			if err := os.Remove(claim); err != nil { // stale
				return idMapping{}, fmt.Errorf("remove stale id range claim: %w", err)
			}
		}
		if err := os.Symlink(dir, claim); err != nil {
			return idMapping{}, fmt.Errorf("claim id range %d: %w", m.base, err)
		}
		if err := os.Lchown(dir, m.host(0), m.host(0)); err != nil {
			_ = os.Remove(claim)
			return idMapping{}, fmt.Errorf("give sandbox dir to its root: %w", err)
		}
		a.hold(m, true)
		return m, nil
	}
	return idMapping{}, errors.New("every user id range on this host is in use: too many sandboxes")
}

// release drops dir's claim of m, if it has it. The directory goes first
// (or is given up): a claim with no directory is stale anyway.
func (a *idAllocator) release(m idMapping, dir string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	unlock, err := a.lock()
	if err != nil {
		return err
	}
	defer unlock()
	a.hold(m, false)
	claim := a.claimPath(m)
	if target, err := os.Readlink(claim); err == nil && target == dir {
		return os.Remove(claim)
	}
	return nil
}

// adoptExisting claims the ranges of this daemon's sandbox directories
// that have none, as left by a version without claims. A range claimed
// for another directory meanwhile cannot be given back: said, not fixed.
func (a *idAllocator) adoptExisting() error {
	entries, err := os.ReadDir(a.sandboxDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read sandbox dir: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(a.sandboxDir, e.Name())
		m, ok := mappingOf(dir)
		if !ok {
			continue
		}
		claim := a.claimPath(m)
		target, err := os.Readlink(claim)
		a.hold(m, true)
		switch {
		case err == nil && target == dir:
		case err == nil && ownedBy(target, m):
			return fmt.Errorf("sandbox directories %s and %s have the same id range %d: remove one of the sandboxes", dir, target, m.base)
		default:
			_ = os.Remove(claim)
			if err := os.Symlink(dir, claim); err != nil {
				return fmt.Errorf("claim id range %d: %w", m.base, err)
			}
		}
	}
	return nil
}

// hold records whether this allocator holds m (a.mu held).
func (a *idAllocator) hold(m idMapping, held bool) {
	if a.held == nil {
		a.held = map[uint32]bool{}
	}
	if held {
		a.held[m.base] = true
	} else {
		delete(a.held, m.base)
	}
}

// lock takes the registry's lock, making the registry on first use.
func (a *idAllocator) lock() (func(), error) {
	if err := os.MkdirAll(a.registry, 0o700); err != nil {
		return nil, fmt.Errorf("make id range registry: %w", err)
	}
	fd, err := unix.Open(filepath.Join(a.registry, ".lock"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open id range registry's lock: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock id range registry: %w", err)
	}
	return func() { unix.Close(fd) }, nil
}

func (a *idAllocator) claimPath(m idMapping) string {
	return filepath.Join(a.registry, strconv.FormatUint(uint64(m.base), 10))
}

// ownedBy reports whether dir exists and is owned by m's root.
func ownedBy(dir string, m idMapping) bool {
	got, ok := mappingOf(dir)
	return ok && got == m
}

// userns returns a user namespace with mapping m, kept for the next
// sandbox with m: the caller must not close it.
func (a *idAllocator) userns(m idMapping) (*os.File, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ns, ok := a.namespaces[m.base]; ok {
		return ns, nil
	}
	ns, err := NewUserns(m.base)
	if err != nil {
		return nil, err
	}
	if a.namespaces == nil {
		a.namespaces = map[uint32]*os.File{}
	}
	a.namespaces[m.base] = ns
	return ns, nil
}
