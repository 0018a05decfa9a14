package backendtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

	t.Run("Network", func(t *testing.T) {
		// /proc/net/dev: two header lines, then "name: counters" a line.
		var names []string
		for _, line := range strings.Split(a.mustSh(t, "cat /proc/net/dev"), "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
				names = append(names, strings.TrimSpace(name))
			}
		}
		if len(names) != 1 || names[0] != "lo" {
			t.Errorf("network interfaces %v, want only lo", names)
		}
	})
}
