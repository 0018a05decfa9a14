package backendtest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/net/sandboxnet"
)

// testIsolation checks what a sandbox must not see: the host's and other
// sandboxes' processes, files and network, and the host's name. Checks that
// concern the sandbox's whole world run as root in it.
func (s *suite) testIsolation(t *testing.T) {
	if !s.h.Isolates {
		t.Skip("the backend does not isolate sandboxes from the host")
	}
	a, b := s.create(t), s.create(t)

	t.Run("Hostname", func(t *testing.T) {
		if got := a.mustSh(t, "uname -n"); got != a.spec.Hostname+"\n" {
			t.Errorf("uname -n: %q, want the spec's %q", got, a.spec.Hostname)
		}
	})

	t.Run("Processes", func(t *testing.T) {
		// The host runs many processes; the sandbox has its agent, maybe a
		// shim, and this pipeline.
		out := a.shAsRoot(t, `ls /proc | grep -c '^[0-9]'; tr '\0' ' ' < /proc/1/cmdline`).stdout
		count, cmdline, _ := strings.Cut(out, "\n")
		if n, err := strconv.Atoi(count); err != nil || n > 10 {
			t.Errorf("the sandbox sees %q processes, want its own few", count)
		}
		if !strings.Contains(cmdline, " agent") {
			t.Errorf("PID 1 is %q, want the agent", cmdline)
		}
	})

	t.Run("HostSeccomp", func(t *testing.T) {
		// What runs a sandbox on the host is held to the system calls it
		// needs: runc's container by the bundle's profile, gVisor's kernel
		// and gofer by the filters runsc installs (compiled ahead, as
		// make runsc builds it).
		if s.h.HostProcesses == nil {
			t.Skip("the harness does not name the sandbox's host processes")
		}
		pids := s.h.HostProcesses(t, a.handle)
		if len(pids) == 0 {
			t.Fatal("no host process runs the sandbox")
		}
		for _, pid := range pids {
			status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
			if err != nil {
				t.Errorf("process %d: %v", pid, err)
				continue
			}
			if !slices.Contains(strings.Split(string(status), "\n"), "Seccomp:\t2") {
				t.Errorf("host process %d of the sandbox runs without a seccomp filter:\n%s", pid, status)
			}
		}
	})

	t.Run("RootCapabilities", func(t *testing.T) {
		// A command as root holds the sandbox's bounding set and no more,
		// whatever the agent holds itself (under gVisor CAP_SYS_RESOURCE,
		// which would lift the process limit).
		out := a.shAsRoot(t, `grep ^Cap /proc/self/status`).stdout
		caps := map[string]uint64{}
		for line := range strings.Lines(out) {
			name, hex, _ := strings.Cut(strings.TrimSpace(line), ":\t")
			v, err := strconv.ParseUint(hex, 16, 64)
			if err != nil {
				t.Fatalf("/proc/self/status: %q", out)
			}
			caps[name] = v
		}
		const sysAdmin, sysResource = 1 << 21, 1 << 24
		bnd := caps["CapBnd"]
		if len(caps) != 5 || bnd == 0 || bnd&(sysAdmin|sysResource) != 0 ||
			caps["CapPrm"] != bnd || caps["CapEff"] != bnd || caps["CapInh"] != 0 || caps["CapAmb"] != 0 {
			t.Errorf("root's capabilities %q: want the bounding set, without CAP_SYS_ADMIN and CAP_SYS_RESOURCE, and nothing inheritable", out)
		}
	})

	t.Run("HostFiles", func(t *testing.T) {
		secret := randomHex()
		path := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		r := a.shAsRoot(t, "cat "+path)
		if r.exitCode == 0 || strings.Contains(r.stdout, secret) {
			t.Errorf("root in the sandbox read the host's %s: exit %d, %q", path, r.exitCode, r.stdout)
		}
	})

	t.Run("OtherSandboxes", func(t *testing.T) {
		path := "/tmp/conformance-" + randomHex()
		if got := a.mustSh(t, "echo mine > "+path+" && cat "+path); got != "mine\n" {
			t.Fatalf("the sandbox does not see its own %s: %q", path, got)
		}
		if r := b.shAsRoot(t, "cat "+path); r.exitCode == 0 {
			t.Errorf("another sandbox read %s: %q", path, r.stdout)
		}
	})

	t.Run("UserNamespace", func(t *testing.T) {
		if !s.h.UserNamespace {
			t.Skip("the backend runs sandboxes without a user namespace")
		}
		// /proc/self/uid_map: "inside outside count".
		mapOf := func(sb *sandbox) []string {
			r := sb.shAsRoot(t, "cat /proc/self/uid_map /proc/self/gid_map")
			return strings.Fields(r.stdout)
		}
		ma, mb := mapOf(a), mapOf(b)
		if len(ma) != 6 || ma[0] != "0" || ma[1] == "0" || ma[2] != "65536" || ma[4] != ma[1] {
			t.Errorf("uid and gid maps %q: want 0 mapped to a host id other than root, 65536 ids", ma)
		}
		if len(mb) != 6 || mb[1] == ma[1] {
			t.Errorf("two sandboxes map root to host ids %q and %q: want ranges of their own", ma, mb)
		}
		// Seen through the namespace, files keep their owners, and root
		// writes its own layer.
		want := "root root\nroot root\nuser user\n"
		if got := a.shAsRoot(t, "stat -c '%U %G' / /usr/bin/env /home/user").stdout; got != want {
			t.Errorf("owners of /, /usr/bin/env and /home/user: %q, want %q", got, want)
		}
		if r := a.shAsRoot(t, "echo x >> /etc/passwd && mkdir /root/dir && chown user /root/dir && stat -c %U /root/dir"); r.stdout != "user\n" {
			t.Errorf("root writing its root: exit %d, %q %q", r.exitCode, r.stdout, r.stderr)
		}
	})

	t.Run("Network", func(t *testing.T) {
		// /proc/net/dev: two header lines, then "name: counters" a line.
		var names []string
		for _, line := range strings.Split(a.mustSh(t, "cat /proc/net/dev"), "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
				names = append(names, strings.TrimSpace(name))
			}
		}
		slices.Sort(names)
		want := []string{"lo"}
		if s.backend.Capabilities().Network != nil {
			want = []string{sandboxnet.SandboxIface, "lo"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("network interfaces %v, want %v", names, want)
		}
	})
}
