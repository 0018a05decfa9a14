package e2e

import (
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A fork bomb fills the sandbox's process limit and no more: the sandbox
// still answers, and so do its neighbour and the daemon. Under gVisor the
// limit is RLIMIT_NPROC inside gVisor's kernel, so that the bomb cannot
// starve gVisor of host threads and take the sandbox down.
func TestForkBombIsContained(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		bomb := d.create(client.CreateSandboxRequest{Runtime: runtime, Pids: 128})
		neighbour := d.create(client.CreateSandboxRequest{Runtime: runtime})

		res, err := d.client.Exec(t.Context(), bomb.ID, client.ExecRequest{
			Command: "f() { f | f & }; f; sleep 3", TimeoutS: 10,
		})
		if err != nil {
			t.Fatalf("fork bomb: %v", err)
		}
		t.Logf("fork bomb ended: exit %d, killed_by %q", res.ExitCode, res.KilledBy)
		if got := d.exec(bomb.ID, "echo alive"); got.Stdout != "alive\n" {
			t.Fatalf("the bombed sandbox after the bomb: %+v", got)
		}
		if got := d.exec(neighbour.ID, "echo fine"); got.Stdout != "fine\n" {
			t.Fatalf("the neighbour: %+v", got)
		}
		if _, err := d.client.Health(t.Context()); err != nil {
			t.Fatalf("the daemon: %v", err)
		}
	})
}

// What root and the user in a sandbox try against the host fails, on both
// runtimes, and leaves the sandbox, its neighbour and the daemon working.
func TestHostileCallsFail(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		neighbour := d.create(client.CreateSandboxRequest{Runtime: runtime})
		tests := []struct {
			name, user, command, want string // want: the whole stdout
		}{
			{"read /proc/kcore", "root", "head -c 16 /proc/kcore 2>/dev/null | wc -c", "0\n"},
			{"write /proc/sys", "root", "echo 1 > /proc/sys/kernel/sysrq 2>/dev/null && echo wrote || echo refused", "refused\n"},
			{"write /sys", "root", "echo x > /sys/kernel/uevent_helper 2>/dev/null && echo wrote || echo refused", "refused\n"},
			{"mknod a disk", "root", "mknod /tmp/sda b 8 0 2>/dev/null && echo made || echo refused", "refused\n"},
			{"open a raw socket", "root", `python3 -c '
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("opened")
except PermissionError:
    print("refused")
'`, "refused\n"},
			{"ptrace PID 1", "root", `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("attached" if libc.ptrace(16, 1, 0, 0) == 0 else "refused")
'`, "refused\n"},
			// The setuid bit does not raise a user's privileges
			// (no_new_privs; gVisor also ignores the bit).
			{"make a setuid copy of id", "root", "cp /usr/bin/id /tmp/suid-id && chmod 4755 /tmp/suid-id && stat -c %a /tmp/suid-id", "4755\n"},
			{"run it as the user", "user", "/tmp/suid-id -u", "1000\n"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{Command: tt.command, User: tt.user})
				if err != nil {
					t.Fatal(err)
				}
				if res.Stdout != tt.want {
					t.Fatalf("%q as %s: stdout %q, stderr %q, exit %d; want stdout %q", tt.command, tt.user, res.Stdout, res.Stderr, res.ExitCode, tt.want)
				}
			})
		}
		if got := d.exec(neighbour.ID, "echo fine"); got.Stdout != "fine\n" {
			t.Fatalf("the neighbour: %+v", got)
		}
	})
}

// A command that ignores SIGTERM is killed with SIGKILL after the grace
// period of its timeout.
func TestTimeoutKillsWhatIgnoresSIGTERM(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		start := time.Now()
		res, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{
			Command: "trap '' TERM; echo ready; while :; do sleep 1; done", TimeoutS: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.KilledBy != client.KilledByTimeout || res.Stdout != "ready\n" {
			t.Fatalf("result = %+v, want killed_by timeout after printing ready", res)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("a 1 s timeout took %v", took)
		}
	})
}
