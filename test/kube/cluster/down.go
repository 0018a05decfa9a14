package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AddSandboxRoots names the data and run dirs of the Hutch node daemons
// the caller runs in the cluster: their sandboxes' cgroups are outside
// the cluster's (/hutch/<id>, as on a single box), and Down removes them.
func (c *Cluster) AddSandboxRoots(dirs ...string) error {
	c.state.SandboxRoots = append(c.state.SandboxRoots, dirs...)
	return c.state.save()
}

// AddCgroups names cgroups, relative to each hierarchy, that the pods
// the caller runs make outside the cluster's (deploy/node.yaml's
// hutch-daemons): Down removes those that are not there now.
func (c *Cluster) AddCgroups(names ...string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, n := range names {
		there := false
		for _, h := range hs {
			if _, err := os.Stat(filepath.Join(h, n)); err == nil {
				there = true
			}
		}
		if !there {
			c.state.Cgroups = append(c.state.Cgroups, n)
		}
	}
	return c.state.save()
}

// Down stops the cluster and puts the host back as it was: every process
// it started (and its pods, shims and the node daemons' sandboxes)
// killed, its mount namespace gone with them, its cgroups, bridge,
// nftables tables and directories removed, and the sysctls back. It
// returns what it could not undo. Pods are best deleted through the API
// before (their containers then stop as they would).
func (c *Cluster) Down() error {
	// In the order KUBE-TESTBED.md gives: the API server may ignore
	// SIGTERM once etcd is gone.
	order := []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "containerd", "etcd"}
	for _, name := range order {
		for _, p := range c.procs {
			if p.name == name {
				p.stop(10 * time.Second)
			}
		}
	}
	var err error
	if c.stateSaved {
		err = cleanHost(&c.state, c.logf)
	} else {
		// Refused before it touched the host: only its files to remove.
		err = os.RemoveAll(c.cfg.Dir)
	}
	for _, p := range c.procs {
		p.stop(time.Second) // all dead by now; this reaps them
	}
	if c.lock != nil {
		_ = os.Remove(lockFile) // before unlocking: a waiting run makes its own
		c.lock.Close()
	}
	return err
}

// cleanHost undoes what a cluster recorded in s did to the host, whether
// its processes still run (a run that died) or were stopped already.
func cleanHost(s *hostState, logf func(string, ...any)) error {
	var errs []error
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	ids := sandboxIDs(s.SandboxRoots)
	var trees []string
	for _, h := range hs {
		trees = append(trees, filepath.Join(h, CgroupName))
		for _, id := range ids {
			trees = append(trees, filepath.Join(h, "hutch", id))
		}
		for _, n := range s.Cgroups {
			trees = append(trees, filepath.Join(h, n))
		}
	}
	// Every process left: the mount namespace's holder, shims, pods'
	// containers, sandboxes. Their mounts die with their namespaces.
	if err := killCgroupTrees(trees, 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	// A disk's loop device detaches itself once its last mount is gone
	// (autoclear), which may take the kernel a moment.
	for deadline := time.Now().Add(5 * time.Second); len(loopDevicesUnder(s.Dir)) > 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	for _, dev := range loopDevicesUnder(s.Dir) {
		if err := run("losetup", "-d", dev); err != nil {
			errs = append(errs, err)
		}
	}
	// Out of the cluster's cgroup (back where it was) before removing it.
	track := trackingHierarchy(hs)
	if own, err := ownCgroup(track); err == nil && strings.HasPrefix(own, "/"+CgroupName) {
		back := filepath.Join(track, s.Cgroup, "cgroup.procs")
		if err := os.WriteFile(back, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			errs = append(errs, fmt.Errorf("move back to cgroup %s: %w", s.Cgroup, err))
		}
	}
	for _, t := range trees {
		if err := removeCgroupTree(t); err != nil {
			errs = append(errs, err)
		}
	}
	if linkExists(Bridge) {
		if err := run("ip", "link", "del", Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	for _, t := range nftTables() {
		if strings.HasSuffix(t, " kube-proxy") {
			if err := run("nft", "delete", "table", strings.Fields(t)[0], "kube-proxy"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range append(slices.Clone(s.NewPaths), s.Dir) {
		if p == "" {
			continue
		}
		if m := mountsUnder(p); len(m) > 0 {
			errs = append(errs, fmt.Errorf("not removing %s: the host has mounts under it: %v", p, m))
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			} else if p != s.Dir {
				logf("removed %s, which the kubelet or containerd made", p)
			}
		}
	}
	if err := restoreSysctls(s.Sysctls, logf); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, census(s, trees))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.Remove(stateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// census reports what is still there of the cluster after cleanHost.
func census(s *hostState, trees []string) error {
	var left []string
	for _, t := range trees {
		if _, err := os.Stat(t); err == nil {
			left = append(left, "cgroup "+t)
		}
	}
	if linkExists(Bridge) {
		left = append(left, "interface "+Bridge)
	}
	for _, t := range nftTables() {
		if strings.HasSuffix(t, " kube-proxy") {
			left = append(left, "nftables table "+t)
		}
	}
	for _, p := range append(slices.Clone(s.NewPaths), s.Dir) {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, "path "+p)
		}
	}
	for _, d := range loopDevicesUnder(s.Dir) {
		left = append(left, "loop device "+d)
	}
	for name, was := range s.Sysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", name)) // #nosec G304 -- a sysctl the cluster saved
		if err == nil && strings.TrimSpace(string(b)) != was {
			left = append(left, fmt.Sprintf("sysctl %s=%s (was %s)", name, strings.TrimSpace(string(b)), was))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left on the host: %s", strings.Join(left, "; "))
	}
	return nil
}
