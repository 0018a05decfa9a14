package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

var (
	_ backend.Watcher = (*Runtime)(nil)
	_ backend.Killer  = (*Runtime)(nil)
)

// The process a sandbox lives by is the one the runtime writes to the pid
// file (--pid-file) when it starts or restores the container: runc's
// container init, which is the agent, and runsc's sandbox process, the
// gVisor kernel. When it ends by itself, so has the sandbox.

// pidFile is where the runtime writes it, in the sandbox's directory.
func (l sandboxLayout) pidFile() string { return filepath.Join(l.dir, "init.pid") }

// Watch calls ended, once, when the sandbox's process ends while ctx
// lasts, saying how it ended (see backend.Watcher).
func (r *Runtime) Watch(ctx context.Context, h backend.Handle, ended func(reason string)) error {
	if r.cfg.Exits == nil {
		return errdefs.NotImplemented("runtime %s watches no sandboxes: no exit watcher configured", r.cfg.Name)
	}
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	pid, err := readPid(r.layout(h.ID).pidFile())
	if err != nil {
		return fmt.Errorf("watch sandbox %s: %w", h.ID, err)
	}
	alive := func() bool { return inSandbox(pid, h.ID) }
	before, _ := r.LimitHits(ctx, h)
	what := "its agent"
	if r.cfg.KernelCountsProcesses {
		what = "its gVisor sandbox process"
	}
	go func() {
		exit, err := r.cfg.Exits.Wait(ctx, pid, alive)
		if err != nil {
			return // no longer watched
		}
		reason := fmt.Sprintf("%s (pid %d) %s", what, pid, exit)
		// What the cgroup saw, not a verdict: OOM kills of commands
		// (gVisor's stubs included) count there too.
		if after, err := r.LimitHits(context.WithoutCancel(ctx), h); err == nil && after.OOMKills > before.OOMKills &&
			(!exit.Known || exit.Signal == unix.SIGKILL) {
			reason += fmt.Sprintf("; the host's OOM killer had acted %d time(s) in the sandbox's memory cgroup since it started", after.OOMKills-before.OOMKills)
		}
		ended(reason)
	}()
	return nil
}

// inSandbox reports whether pid is sandbox id's process: the pid in its
// pid file is while that process is in the sandbox's cgroup, since a pid
// is another process's once its own has gone.
func inSandbox(pid int, id string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup")) // #nosec G304 -- a /proc path built from a pid
	return err == nil && strings.Contains(string(b), "/hutch/"+id+"\n")
}

// Kill sends SIGKILL to the sandbox's process (see backend.Killer): under
// runc the container's init, the agent, whose end takes every process of
// its pid namespace with it; under gVisor the sandbox process, the kernel
// every process of the sandbox runs in. The signal goes through a pidfd
// opened before the cgroup check, so a pid reused meanwhile is not hit.
func (r *Runtime) Kill(_ context.Context, h backend.Handle) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	pid, err := readPid(r.layout(h.ID).pidFile())
	if err != nil {
		return nil // never started, or halted: nothing runs
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // gone already
	}
	defer unix.Close(fd)
	if !inSandbox(pid, h.ID) {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return fmt.Errorf("kill sandbox %s: %w", h.ID, err)
	}
	return nil
}
