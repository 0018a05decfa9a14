package oci

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Paths inside every sandbox.
const (
	// AgentDir holds the agent's executable.
	AgentDir = "/.hutch"
	// AgentBinary is where the daemon's own executable is bind-mounted.
	AgentBinary = AgentDir + "/hutch"
	// AgentSocketDir is where a sandbox whose agent listens itself sees the
	// host directory the agent listens in.
	AgentSocketDir = AgentDir + "/run"
	// AgentSocketName is the agent socket's file name.
	AgentSocketName = "agent.sock"
)

// capabilities are what processes in a sandbox may hold. Processes run as
// uid 1000 hold none of them; these matter for the agent (PID 1, root) and for
// calls that ask for root. Left out on purpose, among others: SYS_ADMIN
// (mount, namespaces), NET_RAW (raw sockets), MKNOD, SYS_PTRACE, SYS_MODULE,
// NET_ADMIN, SYS_TIME, AUDIT_CONTROL.
var capabilities = []string{
	"CAP_CHOWN",            // the agent hands files it writes to the user
	"CAP_DAC_OVERRIDE",     // file calls as root reach every path
	"CAP_FOWNER",           // chmod/utime on files of other users
	"CAP_FSETID",           // keep setgid bits on chown, as root expects
	"CAP_KILL",             // the agent signals and kills user processes
	"CAP_SETGID",           // the agent starts processes as the user
	"CAP_SETUID",           // likewise
	"CAP_SETPCAP",          // dropping capabilities in children
	"CAP_NET_BIND_SERVICE", // root may listen on ports below 1024
	"CAP_SYS_CHROOT",       // chroot-based tools (some package managers)
	"CAP_AUDIT_WRITE",      // su/login-style tools write audit records
}

// maskedPaths and readonlyPaths hide or freeze the parts of /proc and /sys
// that leak host information or reach the host kernel (the list `runc spec`
// and Docker use).
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi", "/sys/firmware",
	"/sys/devices/virtual/powercap",
}

var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// cpuPeriod is the CFS period the CPU limit is expressed in, in µs.
const cpuPeriod = 100000

// gvisorHostTasks is the room a gVisor sandbox's cgroup leaves above its
// process limit for gVisor's own host tasks: an idle sandbox has ~100
// (Sentry and gofer threads), and the systrap platform adds a stub process
// per address space inside.
const gvisorHostTasks = 512

// specFor builds the OCI runtime config of a sandbox. c.AgentExe is the host
// path of the binary run as PID 1. The agent serves on descriptor 3, the
// listening socket the runtime hands over (see listenAgent), unless it
// listens itself (c.AgentListens) in socketDir, bind-mounted at
// AgentSocketDir. With ns the sandbox runs in a user namespace of that
// mapping.
func specFor(s backend.Spec, c Config, socketDir string, ns *userNS) *specs.Spec {
	env := append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
	}, s.Env...)
	if !slices.ContainsFunc(s.Env, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }) {
		env = append(env, "GOMAXPROCS=1", agentv1.OneProcessor+"=1")
	}

	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	mounts = append(mounts, cgroupMounts(c, s.ID)...)
	mounts = append(mounts, specs.Mount{Destination: AgentBinary, Type: "bind", Source: c.AgentExe, Options: []string{"bind", "ro", "nosuid", "nodev"}})
	agentArgs := []string{AgentBinary, "agent", "--listen-fd", "3"}
	if c.AgentListens {
		mounts = append(mounts, specs.Mount{Destination: AgentSocketDir, Type: "bind", Source: socketDir,
			Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}})
		agentArgs = []string{AgentBinary, "agent", "--socket", AgentSocketDir + "/" + AgentSocketName}
	}
	agentCaps, agentInheritable := capabilities, []string(nil)
	if c.KernelCountsProcesses {
		// The process limit is then RLIMIT_NPROC (below), which
		// CAP_SYS_RESOURCE exempts the agent from: it need not make its
		// threads ahead. Not in the bounding set, so that no program
		// the agent starts as root gets it at its exec; in the
		// inheritable one, which the agent drops at its start, because
		// the runtime starts the agent itself by such an exec.
		agentCaps = append(slices.Clip(capabilities), "CAP_SYS_RESOURCE")
		agentInheritable = []string{"CAP_SYS_RESOURCE"}
		agentArgs = append(agentArgs, "--nproc-exempt")
	}
	if usesTenantCgroup(c, s) {
		agentArgs = append(agentArgs, TenantTasksFlag, strconv.Itoa(tenantTasksFD))
	}
	for _, b := range s.Binds {
		opts := []string{"rbind", "nosuid", "nodev"}
		if b.Writable {
			opts = append(opts, "rw")
		} else {
			opts = append(opts, "ro")
		}
		mounts = append(mounts, specs.Mount{Destination: b.Destination, Type: "bind", Source: b.Source, Options: opts})
	}

	var res specs.LinuxResources
	if s.Limits.MemoryBytes > 0 {
		// Under gVisor the host limit gets headroom once it runs (see
		// oom.go); its kernel sizes itself to this one.
		res.Memory = &specs.LinuxMemory{Limit: &s.Limits.MemoryBytes}
	}
	if s.Limits.CPUs > 0 {
		quota := int64(math.Round(s.Limits.CPUs * cpuPeriod))
		period := uint64(cpuPeriod)
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	var rlimits []specs.POSIXRlimit
	if s.Limits.Pids > 0 {
		limit := s.Limits.Pids
		if c.KernelCountsProcesses {
			// Inside gVisor the limit is per user, on the sandbox's own
			// processes; the host's pids limit must not starve gVisor.
			// #nosec G115 -- limits are checked positive and small by the manager
			n := uint64(limit)
			rlimits = append(rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: n, Soft: n})
			limit += gvisorHostTasks
		} else {
			// The agent's threads, made up front, are not the
			// sandbox's processes either.
			limit += agentv1.Threads
		}
		res.Pids = &specs.LinuxPids{Limit: &limit}
	}
	// No devices but the defaults the runtime always creates
	// (null, zero, full, random, urandom, tty, ptmx).
	res.Devices = []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}

	spec := &specs.Spec{
		Version:  specs.Version,
		Hostname: s.Hostname,
		Root:     &specs.Root{Path: "rootfs"},
		Process: &specs.Process{
			Args: agentArgs,
			Env:  env,
			Cwd:  "/",
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding:    capabilities,
				Effective:   agentCaps,
				Permitted:   agentCaps,
				Inheritable: agentInheritable,
			},
			NoNewPrivileges: true,
			Rlimits:         rlimits,
			OOMScoreAdj:     oomScoreAdj(c),
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.CgroupNamespace},
			},
			CgroupsPath:   cgroupsPath(s.ID),
			Resources:     &res,
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
			// runc has the host kernel apply it; runsc, given
			// --oci-seccomp, applies it in gVisor's own kernel, so that a
			// sandbox behaves alike on both.
			Seccomp: seccompProfile(c.SeccompErrnoIsEPERM),
		},
	}
	if ns != nil {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		spec.Linux.UIDMappings, spec.Linux.GIDMappings = ns.ids.spec(), ns.ids.spec()
	}
	return spec
}

// oomScoreAdj is the score the runtime gives the sandbox's own processes:
// gVisor's kernel and gofer are kept out of the host OOM killer's reach
// where the daemon may do so (see oom.go); otherwise the runtime's default.
func oomScoreAdj(c Config) *int {
	if !c.StubsTakeOOMKills || !mayLowerOOMScores() {
		return nil
	}
	adj := -1000
	return &adj
}

// cgroupsPath is a sandbox's cgroup, below each hierarchy's root.
func cgroupsPath(id string) string { return "/hutch/" + id }

// sandboxControllers are the cgroup v1 hierarchies a sandbox sees its own
// cgroup of: those programs read to size themselves to their limits (a
// JVM's heap, Go's GOMAXPROCS, Node's heap).
var sandboxControllers = []string{"memory", "cpu", "cpuacct", "cpuset", "pids"}

// hostV1Controllers says whether the host has each of sandboxControllers as
// a cgroup v1 hierarchy of its own, a directory (not comounted behind a
// symlink) below cgroupRoot.
var hostV1Controllers = sync.OnceValue(func() bool {
	for _, name := range sandboxControllers {
		dir := filepath.Join(cgroupRoot, name)
		var st unix.Statfs_t
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || unix.Statfs(dir, &st) != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			return false
		}
	}
	return true
})

// cgroupMounts shows the sandbox its cgroups at /sys/fs/cgroup, read-only.
// With CgroupBinds on a host of separate v1 hierarchies, these are a tmpfs
// and a bind of the sandbox's own cgroup directory of each of
// sandboxControllers, which the runtime has made before it mounts: six
// mounts at every start where the runtime's cgroup mount makes one per
// hierarchy of the host (eleven here), and each costs the start time
// under a kernel lock all starts share. Otherwise it is the runtime's own
// cgroup mount (cgroup v2: one mount of the sandbox's cgroup namespace).
func cgroupMounts(c Config, id string) []specs.Mount {
	ro := []string{"nosuid", "noexec", "nodev", "ro"}
	if !c.CgroupBinds || !hostV1Controllers() {
		return []specs.Mount{{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: append(ro, "relatime")}}
	}
	mounts := []specs.Mount{{Destination: "/sys/fs/cgroup", Type: "tmpfs", Source: "tmpfs", Options: append(ro, "mode=755", "size=64k")}}
	for _, name := range sandboxControllers {
		mounts = append(mounts, specs.Mount{Destination: "/sys/fs/cgroup/" + name, Type: "bind",
			Source: filepath.Join(cgroupRoot, name, cgroupsPath(id)), Options: append([]string{"rbind"}, ro...)})
	}
	return mounts
}
