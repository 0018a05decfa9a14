package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/base/timerslack"
	"github.com/hutchdev/hutch/internal/runtime/oci"
)

// runcRun times one `runc run` of a fresh equivalent bundle.
func (b *bench) runcRun(ctx context.Context, ref *reference, seq int) (_ time.Duration, err error) {
	name := "c" + strconv.Itoa(seq)
	bun, err := ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, echoArgs)
	defer func() { err = errors.Join(err, b.runcDelete(ctx, name), bun.remove()) }()
	if err != nil {
		return 0, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	return firstOutput(b.runcCmd(ctx, b.runcRoot, "run", "--bundle", bun.dir, name))
}

// asHutchRuns is run with runc started as Hutch's daemon starts it: given
// its timer slack (see timerslack), which runc's init and the agent
// inherit. timerslack.With holds the goroutine to its thread, whose slack
// the fork copies, for the whole lifecycle.
func asHutchRuns(run func(*bench, context.Context, *reference, int) (time.Duration, error)) func(*bench, context.Context, *reference, int) (time.Duration, error) {
	return func(b *bench, ctx context.Context, ref *reference, seq int) (d time.Duration, err error) {
		err = timerslack.With(timerslack.Daemon, func() error {
			d, err = run(b, ctx, ref, seq)
			return err
		})
		return d, err
	}
}

// runcAgentReady times `runc run --detach` of a fresh equivalent bundle
// that keeps the agent as its process, handed its listening socket as Hutch
// hands it, until the agent answers GET /health (the request waits in the
// socket's queue until the agent serves). This is the runtime's and the
// agent's share of a Hutch create and first command.
func (b *bench) runcAgentReady(ctx context.Context, ref *reference, seq int) (_ time.Duration, err error) {
	name := "a" + strconv.Itoa(seq)
	cgroup := "/" + b.cgroupParent + "/" + name
	bun, err := ref.prepare(filepath.Join(b.dir, name), name, b.cgroupParent, nil)
	defer func() {
		err = errors.Join(err, b.runcDelete(ctx, name), oci.RemoveTenantCgroup(ctx, cgroup), bun.remove())
	}()
	if err != nil {
		return 0, fmt.Errorf("prepare bundle %s: %w", name, err)
	}
	logf, err := os.Create(filepath.Join(bun.dir, "agent.log")) // as Hutch does
	if err != nil {
		return 0, err
	}
	defer func() { _ = logf.Close() }() // runc's container has its own copy
	socket := filepath.Join(bun.dir, "agent.sock")
	listener, err := listenUnix(socket)
	if err != nil {
		return 0, err
	}
	defer func() { _ = listener.Close() }() // the agent has its own copy
	extra := []*os.File{listener}
	if spec := ref.spec; slices.Contains(spec.Process.Args, oci.TenantTasksFlag) {
		// As Hutch does: the sandbox's processes' own pids cgroup, its
		// tasks file the agent's descriptor 4.
		tasks, err := oci.MakeTenantCgroup(cgroup, *spec.Linux.Resources.Pids.Limit-agentv1.Threads)
		if err != nil {
			return 0, err
		}
		defer func() { _ = tasks.Close() }() // the agent has its own copy
		extra = append(extra, tasks)
	}
	cmd := b.runcCmd(ctx, b.runcRoot, "run", "--detach", "--preserve-fds", strconv.Itoa(len(extra)), "--bundle", bun.dir, name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("runc run --detach %s: %w", name, err)
	}
	if err := agentHealth(ctx, socket, 10*time.Second); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// listenUnix makes a listening unix socket at path and returns it as a file
// to hand to a container.
func listenUnix(path string) (*os.File, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	return f, errors.Join(err, ln.Close())
}

// agentHealth asks the agent behind socket for GET /health.
func agentHealth(ctx context.Context, socket string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
	if err != nil {
		return err
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("agent on %s: %w", socket, err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("agent on %s: GET /health: %s", socket, res.Status)
	}
	return nil
}

// runtimeCmd makes a command of a runtime's CLI with its state root.
type runtimeCmd func(ctx context.Context, root string, args ...string) *exec.Cmd

// runcCmd is runc with a state root.
func (b *bench) runcCmd(ctx context.Context, root string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, b.runc, append([]string{"--root", root}, args...)...)
}

// runcDelete removes a container from the bench's runc root if it is still
// there; `runc run` in the foreground normally deletes it itself.
func (b *bench) runcDelete(ctx context.Context, name string) error {
	return deleteContainer(ctx, b.runcCmd, b.runcRoot, name)
}

// deleteContainer removes container name from a runtime's state root if it
// is still there, even when ctx has ended (^C).
func deleteContainer(ctx context.Context, cmd runtimeCmd, root, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	c := cmd(ctx, root, "delete", "--force", name)
	c.Stderr = &stderr
	if err := c.Run(); err != nil && !strings.Contains(stderr.String(), "does not exist") &&
		!strings.Contains(stderr.String(), "not found") {
		return fmt.Errorf("%s delete %s: %w: %s", filepath.Base(c.Path), name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// containersIn lists the containers in a runtime's state root.
func containersIn(ctx context.Context, cmd runtimeCmd, root string) ([]string, error) {
	out, err := cmd(ctx, root, "list", "--quiet").Output()
	return strings.Fields(string(out)), err
}

// deleteContainers removes every container in a runtime's state root.
func deleteContainers(ctx context.Context, cmd runtimeCmd, root string) error {
	names, _ := containersIn(ctx, cmd, root)
	var errs []error
	for _, name := range names {
		errs = append(errs, deleteContainer(ctx, cmd, root, name))
	}
	return errors.Join(errs...)
}

// cleanupRunc removes whatever the runc peer left: containers in the bench's
// state root, mounts under its directory, its cgroups.
func (b *bench) cleanupRunc(ctx context.Context) error {
	return errors.Join(deleteContainers(ctx, b.runcCmd, b.runcRoot), mountinfo.UnmountUnder(b.dir), removeCgroupTree(b.cgroupParent))
}

// checkNoContainers reports containers left in the runc and runsc state
// roots once the daemon has stopped: sandboxes outlive their daemon, so one
// that was not deleted would still run.
func (b *bench) checkNoContainers(ctx context.Context) error {
	var errs []error
	check := func(cmd runtimeCmd, root string) {
		names, err := containersIn(ctx, cmd, root)
		if err != nil {
			errs = append(errs, fmt.Errorf("list containers in %s: %w", root, err))
		} else if len(names) > 0 {
			errs = append(errs, fmt.Errorf("containers left in %s: %v", root, names))
		}
	}
	check(b.runcCmd, b.runcRoot)
	if b.d != nil {
		check(b.runcCmd, b.d.runcRoot())
	}
	if b.runsc != "" {
		roots := []string{b.runscRoot()}
		if b.d != nil {
			roots = append(roots, b.d.runscRoot())
		}
		for _, root := range roots {
			if _, err := os.Stat(root); err == nil {
				check(b.runscCmd, root)
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes /sys/fs/cgroup/<hierarchy>/<parent> and the
// (empty) cgroups under it in every hierarchy.
func removeCgroupTree(parent string) error {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	if fi, err := os.Stat(filepath.Join("/sys/fs/cgroup", parent)); err == nil && fi.IsDir() {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parent)) // cgroup v2
	}
	var errs []error
	for _, dir := range dirs {
		kids, _ := os.ReadDir(dir)
		for _, k := range kids {
			if k.IsDir() {
				errs = append(errs, ignoreNotExist(os.Remove(filepath.Join(dir, k.Name()))))
			}
		}
		errs = append(errs, ignoreNotExist(os.Remove(dir)))
	}
	return errors.Join(errs...)
}

func ignoreNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
