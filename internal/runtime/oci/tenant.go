package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// tenantCgroup is the child of a runc sandbox's pids cgroup that the
// sandbox's processes go to, limited to the processes the sandbox asked
// for, while the agent's threads stay in the parent, whose limit has
// agentv1.Threads more: processes holding their limit cannot keep the
// agent from making a thread, so the agent need make none ahead.
//
// The agent puts them there by forking each from one thread of its own
// that it has moved into this cgroup (a child starts in its forking
// thread's cgroup), through the cgroup's tasks file, which the daemon
// opens and runc hands over as the agent's descriptor 4: the sandbox
// mounts nothing writable of its cgroups, and the agent closes the file
// before it starts anything.
const tenantCgroup = "sandbox"

// tenantTasksFD is the agent's descriptor of tenantCgroup's tasks file,
// which TenantTasksFlag tells it.
const (
	tenantTasksFD   = 4
	TenantTasksFlag = "--tasks-fd"
)

// usesTenantCgroup says whether sandbox s gets a tenantCgroup: under runc
// (whose agent is handed its listener, descriptor 3), with a process limit,
// on a host whose pids controller is a cgroup v1 hierarchy, where a thread
// may be in a cgroup of its own. (cgroup v2 keeps a process's threads
// together outside its threaded mode; there, and under gVisor, whose limit
// is its kernel's, the agent does without.)
func usesTenantCgroup(c Config, s backend.Spec) bool {
	return !c.KernelCountsProcesses && !c.AgentListens && s.Limits.Pids > 0 && hostV1Controllers()
}

// MakeTenantCgroup makes the pids cgroup at cgroupsPath (a sandbox's, as
// in its spec) and its tenantCgroup, limited to pids processes, before the
// runtime starts the sandbox (runc takes the cgroup as it finds it and sets
// the parent's limit), and opens the tenant cgroup's tasks file for the
// agent. On failure it removes what it made. The bench's runc peers make
// theirs with it too.
func MakeTenantCgroup(cgroupsPath string, pids int64) (_ *os.File, err error) {
	parent := filepath.Join(cgroupRoot, "pids", cgroupsPath)
	dir := filepath.Join(parent, tenantCgroup)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the pids cgroup %s: %w", cgroupsPath, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, RemoveTenantCgroup(context.Background(), cgroupsPath))
		}
	}()
	// #nosec G306 -- a cgroup file; its mode is the kernel's
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(pids, 10)), 0); err != nil {
		return nil, fmt.Errorf("limit the processes of %s: %w", dir, err)
	}
	// #nosec G304 -- the tasks file of the cgroup just made
	f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open the tasks of %s: %w", dir, err)
	}
	return f, nil
}

// RemoveTenantCgroup removes the pids cgroup at cgroupsPath and its
// tenantCgroup, as removeCgroups does; missing ones are fine.
func RemoveTenantCgroup(ctx context.Context, cgroupsPath string) error {
	parent := filepath.Join(cgroupRoot, "pids", cgroupsPath)
	if err := removeCgroup(ctx, filepath.Join(parent, tenantCgroup)); err != nil {
		return err
	}
	return removeCgroup(ctx, parent)
}

// exists says whether path is there (a cgroup file or directory).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
