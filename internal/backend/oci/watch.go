package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/errdefs"
)

var _ backend.Watcher = (*Runtime)(nil)

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
	// The pid is this sandbox's process while that process is in the
	// sandbox's cgroup: a pid is another process's once its own has gone.
	cgroup := "/hutch/" + h.ID
	alive := func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup")) // #nosec G304 -- a /proc path built from a pid
		return err == nil && strings.Contains(string(b), cgroup+"\n")
	}
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
