package oci

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/backendtest"
	"github.com/hutchdev/hutch/internal/runtime/disk"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/test/neighbor"
)

// The conformance suite against real runc and gVisor sandboxes, configured
// as internal/app/daemon configures them (presets.go).

func TestMain(m *testing.M) {
	// The daemon ./setup started, if it runs here, is left as it was.
	before := neighbor.Take(findRunsc())
	code := m.Run()
	if agentBuild.dir != "" {
		_ = os.RemoveAll(agentBuild.dir) // a temporary directory
	}
	if err := neighbor.Take(findRunsc()).Since(before); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func TestConformanceRunc(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed: apt-get install runc (./setup does)")
	}
	runConformance(t, RuncConfig("runc"), backendtest.Harness{ExtraPids: agentv1.Threads, CountsOOMKills: true, CountsPidsMax: true, UserNamespace: true, ListensIn: true, ProcessCgroup: runcProcessCgroup()})
}

// runcProcessCgroup is where the sandbox's processes are under runc (see
// tenantCgroup): a child of the agent's pids cgroup where that is a v1
// hierarchy.
func runcProcessCgroup() string {
	if !hostV1Controllers() {
		return ""
	}
	return "/" + tenantCgroup
}

func TestConformanceGvisor(t *testing.T) {
	requireRoot(t)
	runsc := findRunsc()
	if runsc == "" {
		t.Skip("gVisor's runsc is neither in bin/ nor in PATH: make runsc (./setup does)")
	}
	runConformance(t, GvisorConfig(runsc), backendtest.Harness{ExtraPids: gvisorHostTasks, KeepsProcesses: true})
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root: mounts, cgroups, loop devices")
	}
}

// findRunsc returns the repository's bin/runsc (make runsc), else runsc
// from PATH, else "".
func findRunsc() string {
	if p, err := filepath.Abs("../../../bin/runsc"); err == nil {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	p, _ := exec.LookPath("runsc")
	return p
}

// runConformance runs the suite against the runtime cfg describes, with
// state in a temporary directory of its own. h brings what differs between
// runtimes.
func runConformance(t *testing.T, cfg Config, h backendtest.Harness) {
	base, err := os.MkdirTemp("", "hutch-oci-")
	if err != nil {
		t.Fatal(err)
	}
	// runc reaches the sandboxes' roots from inside their user namespaces,
	// as a stranger: the way there must be open (as the daemon's is).
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Removing a directory something is still mounted in would reach
		// into the mount: leave it to look at.
		if mounts := mustMountsUnder(t, base); len(mounts) > 0 {
			t.Errorf("mounts left under %s, not removed:\n%s", base, strings.Join(mounts, "\n"))
			return
		}
		if err := os.RemoveAll(base); err != nil {
			t.Error(err)
		}
	})
	cfg.AgentExe = buildAgent(t)
	cfg.StateRoot = filepath.Join(base, "state")
	cfg.SandboxDir = filepath.Join(base, "sandboxes")
	cfg.NetnsDir = filepath.Join(base, "netns")
	disks, err := disk.NewPool(filepath.Join(base, "disks"), 256, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Disks = disks
	templates, err := rootfs.Open(filepath.Join(base, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := templates.Get("host")
	if err != nil {
		t.Fatal(err)
	}

	h.New = func(*testing.T) backend.Backend { return New(cfg) }
	h.Spec = func(*testing.T) backend.Spec {
		return backend.Spec{
			RootDir: host.RootDir,
			Binds:   host.Binds,
			Limits:  backend.Limits{CPUs: 1, MemoryBytes: 256 << 20, Pids: 128, DiskBytes: 256 << 20},
		}
	}
	h.Crash = func(t *testing.T, hd backend.Handle) { crash(t, New(cfg), hd.ID) }
	h.AssertGone = func(t *testing.T, ids []string) { assertGone(t, cfg, base, ids) }
	h.AgentLog = func(hd backend.Handle) string { return tailOf(filepath.Join(cfg.SandboxDir, hd.ID, "agent.log")) }
	h.HostProcesses = func(t *testing.T, hd backend.Handle) []int { return hostProcesses(t, New(cfg), hd.ID) }
	h.Isolates, h.Limits = true, true
	backendtest.Run(t, h)
}

// hostProcesses returns the host's processes that run sandbox id: its
// container's first process (runc: the agent; gVisor: its kernel) with
// those that name its directory (gVisor's gofer).
func hostProcesses(t *testing.T, r *Runtime, id string) []int {
	st, err := r.state(t.Context(), id)
	if err != nil || st.Pid <= 0 {
		t.Fatalf("state of sandbox %s: %+v, %v", id, st, err)
	}
	pids := []int{st.Pid}
	for _, p := range backendtest.Processes(r.dir(id)) {
		pid, _, _ := strings.Cut(p, ":")
		if n, err := strconv.Atoi(pid); err == nil && n != st.Pid {
			pids = append(pids, n)
		}
	}
	return pids
}

// agentBuild is the hutch binary the sandboxes run as their agent, built
// once per test binary from the sources under test.
var agentBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func buildAgent(t *testing.T) string {
	t.Helper()
	agentBuild.once.Do(func() {
		if agentBuild.dir, agentBuild.err = os.MkdirTemp("", "hutch-oci-agent-"); agentBuild.err != nil {
			return
		}
		if agentBuild.err = os.Chmod(agentBuild.dir, 0o755); agentBuild.err != nil {
			return // the sandboxes' agent: bind-mounted from inside their user namespaces
		}
		agentBuild.path = filepath.Join(agentBuild.dir, "hutch")
		cmd := exec.Command("go", "build", "-o", agentBuild.path, "github.com/hutchdev/hutch/cmd/hutch")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static: it runs inside sandboxes
		if out, err := cmd.CombinedOutput(); err != nil {
			agentBuild.err = fmt.Errorf("build hutch: %w\n%s", err, out)
		}
	})
	if agentBuild.err != nil {
		t.Fatal(agentBuild.err)
	}
	return agentBuild.path
}

// crash kills the host process at the root of sandbox id's container (runc:
// the agent; gVisor: the sandbox's kernel) and waits until the runtime sees
// the container stopped.
func crash(t *testing.T, r *Runtime, id string) {
	st, err := r.state(t.Context(), id)
	if err != nil || st.Pid <= 0 {
		t.Fatalf("state of sandbox %s: %+v, %v", id, st, err)
	}
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill sandbox %s: %v", id, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := r.state(t.Context(), id); err != nil || st.Status != "running" {
			return
		}
	}
	t.Fatalf("sandbox %s still runs 10 s after its init was killed", id)
}

// assertGone checks that no sandbox left a mount, container, cgroup,
// process, loop device or file (as test/e2e does for the daemon).
func assertGone(t *testing.T, cfg Config, base string, ids []string) {
	if mounts := mustMountsUnder(t, base); len(mounts) > 0 {
		t.Errorf("mounts left behind:\n%s", strings.Join(mounts, "\n"))
	}
	if entries, _ := os.ReadDir(cfg.SandboxDir); len(entries) > 0 {
		t.Errorf("%d sandbox directories left behind", len(entries))
	}
	if entries, _ := os.ReadDir(cfg.NetnsDir); len(entries) > 0 {
		t.Errorf("%d network namespaces left behind", len(entries))
	}
	if images, _ := filepath.Glob(filepath.Join(base, "disks", "*.img")); len(images) > 0 {
		t.Errorf("disks left behind: %v", images)
	}
	for _, f := range disk.Left(func(f string) bool { return strings.HasPrefix(f, base) }) {
		t.Errorf("loop device left on %s", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// #nosec G204 -- the runtime under test
	out, err := exec.CommandContext(ctx, cfg.Binary, "--root", cfg.StateRoot, "list", "--quiet").Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("%s list: %q, %v; want no containers", cfg.Name, out, err)
	}
	for _, id := range ids {
		// cgroup v1 hierarchies, and the v2 tree.
		v1, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", "hutch", id))
		v2, _ := filepath.Glob(filepath.Join(cgroupRoot, "hutch", id))
		if dirs := append(v1, v2...); len(dirs) > 0 {
			t.Errorf("cgroups left behind: %v", dirs)
		}
	}
	// A cgroup cannot be removed while a process is in it; the runtime's
	// own processes (gVisor's gofer) name the state root or the bundle.
	if procs := backendtest.Processes(base); len(procs) > 0 {
		t.Errorf("processes left behind: %v", procs)
	}
}

// mustMountsUnder is mountinfo.Under, failing the test if mountinfo cannot be
// read.
func mustMountsUnder(t *testing.T, dir string) []string {
	points, err := mountinfo.Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	return points
}
