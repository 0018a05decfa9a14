package sandboxnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// InNetns runs fn on a thread inside the network namespace at path (a
// bind-mounted namespace or /proc/PID/ns/net). What fn opens there (a
// socket, a /proc/sys/net file) belongs to that namespace for its life.
func InNetns(path string, fn func() error) error {
	target, err := openNS(path)
	if err != nil {
		return err
	}
	defer target.Close()
	return onThread(func() error {
		return unix.Setns(int(target.Fd()), unix.CLONE_NEWNET)
	}, fn)
}

// onThread runs enter, then fn, on a locked OS thread, and puts the thread
// back into the daemon's network namespace after. A namespace belongs to a
// thread: other goroutines never run on that thread while it is elsewhere.
// A thread that cannot come back ends with its goroutine.
func onThread(enter, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer self.Close()
		if err := enter(); err != nil {
			// enter failed before or at the switch: the thread is where
			// it was only if it can go back there.
			if uerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); uerr == nil {
				runtime.UnlockOSThread()
			}
			done <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("leave network namespace: %w", err))
			return // still locked: the thread ends with the goroutine
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// NewNamespace makes a network namespace, runs setup inside it (on the
// thread that made it), and keeps the namespace at path (a file
// bind-mounted onto it) until RemoveNamespace. On an error nothing is left.
func NewNamespace(path string, setup func() error) error {
	// #nosec G304 -- a path in the daemon's own run dir
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o400)
	if err != nil {
		return fmt.Errorf("create namespace file: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	err = onThread(func() error {
		return unix.Unshare(unix.CLONE_NEWNET)
	}, func() error {
		if err := setup(); err != nil {
			return err
		}
		self := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net"
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("keep network namespace at %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return errors.Join(err, RemoveNamespace(path))
	}
	return nil
}

// RemoveNamespace unmounts a kept namespace and removes its file; the kernel
// frees the namespace (and the interfaces in it) when nothing else holds
// it. A missing one is fine.
func RemoveNamespace(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount network namespace %s: %w", filepath.Base(path), err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace file: %w", err)
	}
	return nil
}

// writeSysctls writes /proc/sys/net settings of the calling thread's
// network namespace: name (as "ipv4/ip_forward") to value. A setting that
// already holds its value is left alone: changing some (ip_forward, an
// interface's disable_ipv6) needs the kernel's network-wide lock, and the
// write spins, restarting, for as long as another holds it, which under
// many sandboxes starting and ending at once cost a millisecond or more of
// CPU per write.
func writeSysctls(settings [][2]string) error {
	for _, s := range settings {
		name := filepath.Join("/proc/sys/net", s[0])
		// #nosec G304 -- fixed names below /proc/sys/net
		if cur, err := os.ReadFile(name); err == nil && strings.TrimSpace(string(cur)) == s[1] {
			continue
		}
		if err := os.WriteFile(name, []byte(s[1]), 0); err != nil {
			return fmt.Errorf("sysctl net.%s: %w", s[0], err)
		}
	}
	return nil
}

// openNS opens a namespace file.
func openNS(path string) (*os.File, error) {
	// #nosec G304 -- a namespace path of the daemon's own run dir or /proc
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	return f, nil
}
