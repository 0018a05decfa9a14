package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

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

// sealedCopy copies the executable at path into a sealed memory file. The
// file stays open for the daemon's life; a process runs it by the returned
// path, its descriptor in /proc/self/fd (or a link to that), which exec
// resolves before it closes the descriptors marked close-on-exec. An update of the binary on
// disk is picked up at the daemon's next start.
func sealedCopy(path string) (exe string, f *os.File, err error) {
	src, err := os.Open(path) // #nosec G304 -- the runtime binary, configuration
	if err != nil {
		return "", nil, err
	}
	defer src.Close()
	fd, err := unix.MemfdCreate("runc", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return "", nil, fmt.Errorf("memfd_create: %w", err)
	}
	f = os.NewFile(uintptr(fd), "memfd:runc")
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if _, err := io.Copy(f, src); err != nil {
		return "", nil, fmt.Errorf("copy %s: %w", path, err)
	}
	if err := unix.Fchmod(fd, 0o500); err != nil {
		return "", nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, runcSeals); err != nil {
		return "", nil, fmt.Errorf("seal the copy of %s: %w", path, err)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), f, nil
}

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
		exe, f, err := sealedCopy(path)
		if err != nil {
			r.log.Warn("runtime runs from its binary: no sealed copy", "runtime", r.cfg.Name, "err", err)
			return
		}
		r.exe, r.sealed = namedLink(r.cfg.StateRoot+".bin", filepath.Base(path), exe), f
	})
	return r.exe
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
