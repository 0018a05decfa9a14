package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// runc 1.1 guards against CVE-2019-5736 (a container overwriting the runc
// binary through /proc/self/exe) by copying itself, 8.7 MB here, into a
// sealed memory file at every container start and executing that copy,
// unless it already runs from one. The daemon makes that copy once and
// runs runc from it: the same protection (a sealed file cannot be written
// to by anyone), one copy and one exec fewer per start.

// runcSeals are the seals runc requires of the file it runs from to take it
// for its own protected copy.
const runcSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// sealedCopy copies the executable at path into a sealed memory file, to
// be kept open for the process's life. A process runs it by its descriptor
// in /proc/self/fd (see fdPath), which exec resolves before it closes the
// descriptors marked close-on-exec. An update of the binary on disk is
// picked up at the daemon's next start.
func sealedCopy(path string) (f *os.File, err error) {
	src, err := os.Open(path) // #nosec G304 -- the runtime binary, configuration
	if err != nil {
		return nil, err
	}
	defer src.Close()
	fd, err := unix.MemfdCreate("runc", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f = os.NewFile(uintptr(fd), "memfd:runc")
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if _, err := io.Copy(f, src); err != nil {
		return nil, fmt.Errorf("copy %s: %w", path, err)
	}
	if err := unix.Fchmod(fd, 0o500); err != nil {
		return nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, runcSeals); err != nil {
		return nil, fmt.Errorf("seal the copy of %s: %w", path, err)
	}
	return f, nil
}

// fdPath is the path a process runs the open file f by.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// executable returns what the runtime is run by: with SealedCopy, the
// sealed copy made on first use, or the binary itself if that copy could
// not be made (the runtime then makes its own, as without the option).
func (r *Runtime) executable() string {
	r.sealOnce.Do(func() {
		r.exe = r.cfg.Binary
		if !r.cfg.SealedCopy {
			return
		}
		path, err := exec.LookPath(r.cfg.Binary)
		if err != nil {
			return // Probe says why
		}
		exe, err := sealedCopyOf(path)
		if err != nil {
			r.log.Warn("runtime runs from its binary: no sealed copy", "runtime", r.cfg.Name, "err", err)
			return
		}
		r.exe = namedLink(r.cfg.StateRoot+".bin", filepath.Base(path), exe)
	})
	return r.exe
}

// sealed holds the process's sealed copies, one per binary path, open for
// the process's life: a Runtime's link names its descriptor, and every
// Runtime of a binary (tests make many, some with one state root) shares
// that descriptor, which must stay that file for as long as any of them
// runs it.
var sealed struct {
	mu     sync.Mutex
	copies map[string]*os.File
}

// sealedCopyOf returns the path of the sealed copy of the binary at path,
// made on first use.
func sealedCopyOf(path string) (string, error) {
	sealed.mu.Lock()
	defer sealed.mu.Unlock()
	if f, ok := sealed.copies[path]; ok {
		return fdPath(f), nil
	}
	f, err := sealedCopy(path)
	if err != nil {
		return "", err
	}
	if sealed.copies == nil {
		sealed.copies = map[string]*os.File{}
	}
	sealed.copies[path] = f
	return fdPath(f), nil
}

// namedLink returns the path of a symlink named name in dir pointing at
// target, made afresh, or target itself if it cannot be made. A process
// started by the link's path is named after it in ps and top (the kernel
// names it after the last element of the path it was started by), rather
// than after the descriptor's number.
func namedLink(dir, name, target string) string {
	link := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return target
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return target
	}
	if err := os.Symlink(target, link); err != nil {
		return target
	}
	return link
}
