// Package neighbor checks that tests and benchmarks leave alone the daemon
// ./setup started on this machine, which they run beside: its containers
// (its sandboxes and its warm pool's) and its API socket must be there
// afterwards as before. Taken before and compared after, not assumed.
package neighbor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/client"
)

// RunDir is the run dir of the daemon ./setup starts (on the default data
// dir).
const RunDir = "/run/hutch"

// Census is what the neighbour daemon had at one moment.
type Census struct {
	socket     uint64   // the socket's inode; 0 when there is none
	containers []string // "runc/hutch-…", "runsc/hutch-…"
	// users are the sandboxes its API lists (a pool's are not listed):
	// their own idle timers may end their containers meanwhile.
	users map[string]bool
}

// Take counts what the neighbour daemon has now; runsc is gVisor's binary
// ("" when there is none here).
func Take(runsc string) Census {
	var c Census
	if fi, err := os.Stat(filepath.Join(RunDir, "hutch.sock")); err == nil {
		c.socket = fi.Sys().(*syscall.Stat_t).Ino
	}
	for name, bin := range map[string]string{"runc": "runc", "runsc": runsc} {
		if bin == "" {
			continue
		}
		root := filepath.Join(RunDir, name)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		// #nosec G204 -- a runtime binary the caller found
		out, err := exec.Command(bin, "--root", root, "list", "--quiet").Output()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			c.containers = append(c.containers, name+"/"+id)
		}
	}
	slices.Sort(c.containers)
	if cl, err := neighborClient(); err == nil && c.socket != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if list, err := cl.ListSandboxes(ctx); err == nil {
			c.users = map[string]bool{}
			for _, sb := range list {
				c.users[sb.ID] = true
			}
		}
	}
	return c
}

func neighborClient() (*client.Client, error) {
	return client.New("unix://"+filepath.Join(RunDir, "hutch.sock"), "")
}

// idledAway reports whether the neighbour says the sandbox of container
// (runtime/hutch-ID) was suspended, stopped or deleted by its own idle
// timer meanwhile: a user's sandbox may, on a machine in use.
func (before Census) idledAway(container string) bool {
	_, name, _ := strings.Cut(container, "/")
	id := strings.TrimPrefix(name, "hutch-")
	if !before.users[id] {
		return false // a pool's: nothing ends it but a create on that daemon
	}
	c, err := neighborClient()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sb, err := c.GetSandbox(ctx, id)
	if client.IsNotFound(err) {
		return true // deleted by its idle action, or its max lifetime
	}
	return err == nil && strings.HasPrefix(sb.StateReason, "idle for")
}

// Empty says there is no neighbour daemon to leave alone.
func (c Census) Empty() bool { return c.socket == 0 && len(c.containers) == 0 }

// Since reports what of before is gone or replaced in c.
func (c Census) Since(before Census) error {
	var errs []error
	if before.socket != 0 && c.socket != before.socket {
		errs = append(errs, fmt.Errorf("the socket %s/hutch.sock was removed or replaced", RunDir))
	}
	for _, id := range before.containers {
		if !slices.Contains(c.containers, id) && !before.idledAway(id) {
			errs = append(errs, fmt.Errorf("its container %s is gone", id))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the daemon of %s was touched: %w", RunDir, errors.Join(errs...))
	}
	return nil
}
