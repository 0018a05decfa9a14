package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the cluster changes on the host outside its own directory, and how
// Down puts it back. hostState is kept in stateFile while a cluster runs,
// so that a run that died (a test binary killed at its timeout) is cleaned
// by the next one.

// stateFile is where a running cluster keeps what Down needs; lockFile
// keeps a second cluster from starting beside it.
const (
	stateFile = "/run/hutch-kube.json"
	lockFile  = "/run/hutch-kube.lock"
)

type hostState struct {
	// Dir is the cluster's directory.
	Dir string `json:"dir"`
	// Sysctls are the values before, of those that may change.
	Sysctls map[string]string `json:"sysctls"`
	// NewPaths are host paths that the kubelet and containerd make
	// whatever their configuration says, and that were not there before.
	NewPaths []string `json:"new_paths"`
	// Cgroup is the pids cgroup (relative to its hierarchy) this process
	// was in before it moved into the cluster's.
	Cgroup string `json:"cgroup"`
	// SandboxRoots are the node daemons' data and run dirs, whose
	// sandboxes' cgroups (/hutch/<id>) Down removes.
	SandboxRoots []string `json:"sandbox_roots"`
	// Cgroups are cgroups (relative to each hierarchy) that the
	// cluster's pods make outside the cluster's own, and that were not
	// there before.
	Cgroups []string `json:"cgroups"`
}

func (s *hostState) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(stateFile, b, 0o600)
}

func loadState() (*hostState, error) {
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return nil, err
	}
	var s hostState
	return &s, json.Unmarshal(b, &s)
}

// hostPaths are what the kubelet and containerd make on the host even
// with every directory they take set to the cluster's.
var hostPaths = []string{
	"/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/var/log/pods",
	"/run/containerd", "/run/nri", "/var/lib/containerd", "/opt/containerd",
	"/etc/cni", "/opt/cni", "/run/runc", "/var/run/kubernetes", "/run/kubernetes",
}

// sysctlDirs are where the kubelet, the bridge and kube-proxy change
// settings (KUBE-TESTBED.md): each file in them is saved, and put back if
// it changed.
var sysctlDirs = []string{
	"vm", "kernel", "kernel/keys", "fs", "fs/inotify",
	"net/core", "net/ipv4", "net/ipv4/conf/all", "net/ipv4/conf/default",
	"net/ipv6/conf/all", "net/ipv6/conf/default", "net/netfilter", "net/bridge",
}

// volatile are sysctls that change by themselves.
var volatile = map[string]bool{
	"kernel/ns_last_pid": true, "kernel/tainted": true, "fs/file-nr": true, "fs/inode-nr": true,
	"fs/inode-state": true, "fs/dentry-state": true, "net/netfilter/nf_conntrack_count": true,
	"kernel/random/entropy_avail": true, "kernel/random/uuid": true, "kernel/random/boot_id": true,
	"fs/dentry-negative": true, "kernel/pty/nr": true,
}

func readSysctls() map[string]string {
	out := map[string]string{}
	for _, d := range sysctlDirs {
		entries, err := os.ReadDir(filepath.Join("/proc/sys", d))
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := d + "/" + e.Name()
			if e.IsDir() || volatile[name] {
				continue
			}
			fi, err := e.Info()
			if err != nil || fi.Mode().Perm()&0o200 == 0 {
				continue // read-only: nothing to put back
			}
			b, err := os.ReadFile(filepath.Join("/proc/sys", name)) // #nosec G304 -- a sysctl
			if err != nil {
				continue
			}
			out[name] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// restoreSysctls writes back every saved value that differs now.
func restoreSysctls(saved map[string]string, logf func(string, ...any)) error {
	var errs []error
	now := readSysctls()
	for name, was := range saved {
		if is, ok := now[name]; !ok || is == was {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(was), 0o600); err != nil {
			errs = append(errs, fmt.Errorf("put back sysctl %s=%s: %w", name, was, err))
			continue
		}
		logf("put back sysctl %s: %s -> %s", name, now[name], was)
	}
	return errors.Join(errs...)
}

// CgroupName is the cluster's cgroup in every hierarchy: this process and
// so every process it starts (etcd, the control plane, containerd and its
// shims, kube-proxy, the kubelet), and below it the kubelet's pods
// (cgroupRoot). Down kills what is in it and removes it.
const CgroupName = "hutch-kube"

// hierarchies are the mounted cgroup hierarchies (v1 controllers, the v2
// one, or v2 alone).
func hierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) {
			continue
		}
		if t := fields[sep+1]; (t == "cgroup" || t == "cgroup2") && strings.HasPrefix(fields[4], "/sys/fs/cgroup") {
			out = append(out, fields[4])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted under /sys/fs/cgroup")
	}
	return out, nil
}

// trackingHierarchy is where this process is moved: the v1 pids
// controller's, else the v2 one.
func trackingHierarchy(hs []string) string {
	for _, h := range hs {
		if filepath.Base(h) == "pids" {
			return h
		}
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, "cgroup.controllers")); err == nil {
			return h
		}
	}
	return hs[0]
}

// ownCgroup is this process's cgroup in hierarchy h, from /proc/self/cgroup.
func ownCgroup(h string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	want := filepath.Base(h)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls := strings.Split(parts[1], ",")
		if slices.Contains(ctrls, want) || (parts[0] == "0" && (want == "unified" || h == "/sys/fs/cgroup")) {
			return parts[2], nil
		}
	}
	return "", fmt.Errorf("no %s cgroup in /proc/self/cgroup", want)
}

// cgroupProcs are the processes in dir and every cgroup below it.
func cgroupProcs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")) // #nosec G304 -- a cgroup of the cluster's
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killCgroupTrees kills every process in dirs (and below) but this one,
// until none is left or the time is up.
func killCgroupTrees(dirs []string, within time.Duration) error {
	self := os.Getpid()
	deadline := time.Now().Add(within)
	for {
		var left []int
		for _, d := range dirs {
			for _, pid := range cgroupProcs(d) {
				if pid != self {
					left = append(left, pid)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still in %v: %v", dirs, left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroupTree removes dir and the cgroups below it, deepest first.
// A cgroup that does not exist is fine.
func removeCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		var err error
		for range 50 { // a cgroup whose last process just died may be busy a moment
			if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// sandboxIDs are the sandboxes a node daemon with these data and run
// dirs may have made: the names in its sandboxes directory and its
// runtimes' state directories.
func sandboxIDs(roots []string) []string {
	seen := map[string]bool{}
	var ids []string
	for _, root := range roots {
		for _, sub := range []string{"sandboxes", "runc", "runsc"} {
			entries, _ := os.ReadDir(filepath.Join(root, sub))
			for _, e := range entries {
				id := strings.TrimPrefix(e.Name(), "hutch-")
				if e.IsDir() && !strings.HasPrefix(id, ".") && !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

// run runs a command for its effect, its output in the error.
func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput() // #nosec G204 -- the cluster's own commands
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// linkExists reports whether a network interface of that name exists.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// nftTables lists the host's nftables tables ("ip kube-proxy", …).
func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var tables []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables
}

// loopDevicesUnder lists loop devices whose backing file is under dir.
func loopDevicesUnder(dir string) []string {
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, m := range matches {
		b, err := os.ReadFile(m) // #nosec G304 -- a loop device's backing file name, from sysfs
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(m))))
		}
	}
	return devs
}

// mountsUnder lists the host's mount points under any of dirs.
func mountsUnder(dirs ...string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		for _, d := range dirs {
			if fields[4] == d || strings.HasPrefix(fields[4], d+"/") {
				out = append(out, fields[4])
			}
		}
	}
	return out
}
