package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/timerslack"
)

func TestLifecycleAndExec(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		ctx := t.Context()

		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Metadata: map[string]string{"owner": "e2e"}, Env: map[string]string{"GREETING": "hello"}})
		if sb.State != client.StateRunning || sb.Runtime != runtime || sb.MemoryMB != 512 || sb.Pids != 256 || sb.CPUs != 1 {
			t.Fatalf("new sandbox = %+v, want running on %s with default limits", sb, runtime)
		}
		got, err := d.client.GetSandbox(ctx, sb.ID)
		if err != nil || got.Metadata["owner"] != "e2e" {
			t.Fatalf("get = %+v, %v", got, err)
		}
		list, err := d.client.ListSandboxes(ctx)
		if err != nil || len(list) != 1 || list[0].ID != sb.ID {
			t.Fatalf("list = %+v, %v", list, err)
		}

		tests := []struct {
			name     string
			req      client.ExecRequest
			wantOut  string
			wantErr  string
			wantCode int
		}{
			{"argv", client.ExecRequest{Cmd: []string{"echo", "a b"}}, "a b\n", "", 0},
			{"shell", client.ExecRequest{Command: "echo out; echo err >&2; exit 3"}, "out\n", "err\n", 3},
			{"sandbox env", client.ExecRequest{Command: `echo "$GREETING"`}, "hello\n", "", 0},
			{"call env wins", client.ExecRequest{Command: `echo "$GREETING"`, Env: map[string]string{"GREETING": "hi"}}, "hi\n", "", 0},
			{"default cwd and user", client.ExecRequest{Command: "pwd; id -un"}, "/home/user/workspace\nuser\n", "", 0},
			{"cwd", client.ExecRequest{Command: "pwd", Cwd: "/tmp"}, "/tmp\n", "", 0},
			{"root", client.ExecRequest{Command: "id -u", User: "root"}, "0\n", "", 0},
			{"stdin", client.ExecRequest{Command: "tr a-z A-Z", Stdin: "shout"}, "SHOUT", "", 0},
			{"killed by signal", client.ExecRequest{Command: "kill -9 $$"}, "", "", 137},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := d.client.Exec(ctx, sb.ID, tt.req)
				if err != nil {
					t.Fatal(err)
				}
				if res.Stdout != tt.wantOut || res.Stderr != tt.wantErr || res.ExitCode != tt.wantCode {
					t.Fatalf("got (%q, %q, %d), want (%q, %q, %d)", res.Stdout, res.Stderr, res.ExitCode, tt.wantOut, tt.wantErr, tt.wantCode)
				}
			})
		}

		t.Run("timer slack", func(t *testing.T) {
			// The daemon's is coarse, and so is runc's agent's, which
			// inherits it; a command's is the kernel's, and so is the
			// gVisor sandbox process's, which keeps the sandbox's time.
			slack := func(pid int) uint64 {
				v, err := timerslack.Of(pid)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			if got := slack(d.cmd.Process.Pid); got != timerslack.Daemon {
				t.Errorf("the daemon's timer slack: %d ns, want %d", got, timerslack.Daemon)
			}
			want := uint64(timerslack.Daemon) // the agent's
			if runtime == "gvisor" {
				want = timerslack.Default
			}
			if got := slack(containerPid(t, d, runtime, sb.ID)); got != want {
				t.Errorf("the timer slack of the sandbox's process on the host: %d ns, want %d", got, want)
			}
			// gVisor's /proc has no timerslack_ns.
			res := d.exec(sb.ID, "cat /proc/self/timerslack_ns 2>/dev/null || echo none")
			if got := strings.TrimSpace(res.Stdout); got != strconv.Itoa(timerslack.Default) && (runtime == "runc" || got != "none") {
				t.Errorf("a command's timer slack: %q, want %d", got, timerslack.Default)
			}
		})

		t.Run("SSE streams live", func(t *testing.T) {
			var events []client.ExecEvent
			var firstAt time.Time
			exit, err := d.client.ExecStream(ctx, sb.ID, client.ExecRequest{Command: "echo one; sleep 2; echo two >&2; exit 4"},
				func(ev client.ExecEvent) error {
					if firstAt.IsZero() {
						firstAt = time.Now()
					}
					events = append(events, ev)
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if exit.ExitCode != 4 {
				t.Fatalf("exit code %d, want 4", exit.ExitCode)
			}
			if len(events) != 2 || events[0].Stream != "stdout" || string(events[0].Data) != "one\n" ||
				events[1].Stream != "stderr" || string(events[1].Data) != "two\n" {
				t.Fatalf("events = %+v", events)
			}
			// Live: "one" came while the command slept, well before its
			// end (timed from the end, not the start, which a loaded host
			// delays).
			if ahead := time.Since(firstAt); ahead < time.Second {
				t.Fatalf("first event came %v before the end of a command that slept 2 s after it: output was not streamed live", ahead)
			}
		})

		t.Run("output cap", func(t *testing.T) {
			res, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "head -c 3000000 /dev/zero | tr '\\0' x"})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Truncated || len(res.Stdout) != 1<<20 {
				t.Fatalf("truncated=%v len=%d, want true and 1 MiB", res.Truncated, len(res.Stdout))
			}
		})

		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.GetSandbox(ctx, sb.ID); !client.IsNotFound(err) {
			t.Fatalf("get after delete: %v, want not_found", err)
		}
		d.assertNothingLeft()
	})
}

func TestIsolation(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})

		tests := []struct {
			name    string
			command string
			user    string
			check   func(res *client.ExecResult) bool
		}{
			{"agent is PID 1 and only sandbox processes are visible", "ps -eo pid=,comm=", "",
				func(r *client.ExecResult) bool {
					lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
					first := strings.Fields(lines[0])
					// agent, its shim, sh? no: ps itself and its shim
					return r.ExitCode == 0 && len(first) == 2 && first[0] == "1" && first[1] == "hutch" && len(lines) <= 4
				}},
			{"runs as uid 1000", "id -u", "", func(r *client.ExecResult) bool { return r.Stdout == "1000\n" }},
			{"/usr is read-only", "touch /usr/x", "root", func(r *client.ExecResult) bool {
				return r.ExitCode != 0 && strings.Contains(r.Stderr, "Read-only")
			}},
			{"mount fails as user", "mount -t tmpfs none /tmp", "", func(r *client.ExecResult) bool { return r.ExitCode != 0 }},
			{"mount fails as root", "mount -t tmpfs none /tmp", "root", func(r *client.ExecResult) bool { return r.ExitCode != 0 }},
			// Loopback, and the link to its router (see TestNetworkPolicy);
			// the daemon's resolver, never the host's.
			{"loopback and eth0 only, the daemon's resolver", "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort; cat /etc/resolv.conf", "", func(r *client.ExecResult) bool {
				return r.Stdout == "eth0\nlo\nnameserver 10.0.2.2\n"
			}},
			{"data dir not visible", "ls " + d.dataDir + " /var/lib/hutch", "root", func(r *client.ExecResult) bool {
				return r.ExitCode != 0 && r.Stdout == ""
			}},
			{"host accounts not visible", "cat /etc/shadow", "root", func(r *client.ExecResult) bool { return r.ExitCode != 0 }},
			{"the agent's fds are closed to root commands", "echo flood > /proc/1/fd/2", "root", func(r *client.ExecResult) bool {
				return r.ExitCode != 0
			}},
			// runc hands the agent a socket that is on the host only; under
			// gVisor the agent listens in a directory it sees (see
			// TestPlantedSocketSymlinkIsRefused).
			// The walk leaves out /proc and /sys, and the host's system
			// directories the host template shows read-only, which hold
			// programs, not sockets (walking them took 50 s under gVisor).
			{"the only socket is the agent's own, where it must be", "ls -A /.hutch; find / \\( -path /proc -o -path /sys -o -path /usr -o -path /lib -o -path /lib64 -o -path /bin -o -path /sbin \\) -prune -o -type s -print", "root",
				func(r *client.ExecResult) bool {
					if runtime == "gvisor" {
						return r.Stdout == "hutch\nrun\n/.hutch/run/agent.sock\n"
					}
					return r.Stdout == "hutch\n"
				}},
			{"its own hostname, also in /etc/hosts", "hostname; grep -c \"$(hostname)\" /etc/hosts; stat -c %a:%U /etc", "",
				func(r *client.ExecResult) bool { return r.Stdout == sb.ID+"\n1\n755:root\n" }},
			{"no new user namespace", "unshare -U true", "", func(r *client.ExecResult) bool {
				return r.ExitCode != 0 && strings.Contains(r.Stderr, "Operation not permitted")
			}},
			// bpf(2), keyctl(2) and userfaultfd(2) by number: -1 and EPERM
			// (1) from the seccomp profile, for root too.
			{"bpf, keyctl and userfaultfd are closed", rawSyscalls, "root", func(r *client.ExecResult) bool {
				return r.Stdout == "-1 1\n-1 1\n-1 1\n"
			}},
			{"/tmp is sticky", "stat -c %a /tmp", "", func(r *client.ExecResult) bool { return r.Stdout == "1777\n" }},
			{"memory limit in force", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes", "", func(r *client.ExecResult) bool {
				return r.Stdout == "536870912\n"
			}},
		}
		if runtime == "runc" {
			// The host's cgroups: on v1 hierarchies, binds of the
			// sandbox's own on a tmpfs (see oci.cgroupMounts). (gVisor's
			// are its kernel's own, which its root may change.)
			tests = append(tests, struct {
				name    string
				command string
				user    string
				check   func(res *client.ExecResult) bool
			}{"its cgroups are read-only, also to root", "echo 1 > /sys/fs/cgroup/pids/pids.max; touch /sys/fs/cgroup/x; cat /sys/fs/cgroup/pids/pids.max", "root",
				func(r *client.ExecResult) bool {
					return strings.Count(r.Stderr, "Read-only file system") == 2 && r.Stdout != "1\n" && r.Stdout != ""
				}})
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if tt.command == rawSyscalls && goruntime.GOARCH != "amd64" {
					t.Skip("the system call numbers in rawSyscalls are x86_64's")
				}
				res, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{Command: tt.command, User: tt.user})
				if err != nil {
					t.Fatal(err)
				}
				if !tt.check(res) {
					t.Fatalf("%q: exit %d, stdout %q, stderr %q", tt.command, res.ExitCode, res.Stdout, res.Stderr)
				}
			})
		}
	})
}

func TestFiles(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})

		content := make([]byte, 10<<20)
		rand.Read(content)
		e, err := d.client.WriteFile(ctx, sb.ID, "deep/dir/blob.bin", bytes.NewReader(content))
		if err != nil {
			t.Fatal(err)
		}
		if e.Path != "/home/user/workspace/deep/dir/blob.bin" || e.Size != int64(len(content)) || e.Owner != "user" {
			t.Fatalf("written entry = %+v", e)
		}
		r, err := d.client.ReadFile(ctx, sb.ID, "/home/user/workspace/deep/dir/blob.bin")
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(back, content) {
			t.Fatalf("read back %d bytes (%v), want the same 10 MiB", len(back), err)
		}
		if res := d.exec(sb.ID, "sha256sum deep/dir/blob.bin | cut -c1-8; stat -c %U deep/dir"); !strings.HasPrefix(res.Stdout, sha256Hex(content)[:8]) ||
			!strings.HasSuffix(res.Stdout, "user\n") {
			t.Fatalf("inside the sandbox: %q, want hash %s and owner user", res.Stdout, sha256Hex(content)[:8])
		}

		if _, err := d.client.MakeDir(ctx, sb.ID, "made/here"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.MoveFile(ctx, sb.ID, "deep/dir/blob.bin", "made/here/moved.bin"); err != nil {
			t.Fatal(err)
		}
		entries, err := d.client.ListFiles(ctx, sb.ID, "made", 2)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, e := range entries {
			paths = append(paths, e.Type+":"+e.Path)
		}
		if strings.Join(paths, ",") != "dir:/home/user/workspace/made/here,file:/home/user/workspace/made/here/moved.bin" {
			t.Fatalf("list = %v", paths)
		}
		if err := d.client.DeleteFile(ctx, sb.ID, "made"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.StatFile(ctx, sb.ID, "made"); !client.IsNotFound(err) {
			t.Fatalf("stat after delete: %v, want not_found", err)
		}

		t.Run("paths stay inside the sandbox", func(t *testing.T) {
			d.exec(sb.ID, "ln -s / rootlink; ln -s "+d.dataDir+" datalink")
			if _, err := d.client.ReadFile(ctx, sb.ID, "datalink/api.key"); !client.IsNotFound(err) {
				t.Fatalf("reading the host's data dir through a symlink: %v, want not_found", err)
			}
			if _, err := d.client.WriteFile(ctx, sb.ID, "../../../../../../tmp/escaped", strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat("/tmp/escaped"); err == nil {
				t.Fatal("a write with .. reached the host's /tmp")
			}
		})

		t.Run("cp both ways", func(t *testing.T) {
			local := filepath.Join(t.TempDir(), "in.bin")
			if err := os.WriteFile(local, content[:123457], 0o644); err != nil {
				t.Fatal(err)
			}
			if _, stderr, code := d.cli("", "cp", local, sb.ID+":/home/user/workspace/in.bin"); code != 0 {
				t.Fatalf("cp in: %d %s", code, stderr)
			}
			out := filepath.Join(t.TempDir(), "out.bin")
			if _, stderr, code := d.cli("", "cp", sb.ID+":in.bin", out); code != 0 {
				t.Fatalf("cp out: %d %s", code, stderr)
			}
			if b, _ := os.ReadFile(out); !bytes.Equal(b, content[:123457]) {
				t.Fatalf("cp round trip changed the file (%d bytes back)", len(b))
			}
		})
	})
}

// Uploads land in the workspace's user-uploads, the user's, by their own
// names, through the SDK and hutch fs upload; a bad one in a batch leaves
// none of the batch.
func TestUpload(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx := t.Context()
	sb := d.create(client.CreateSandboxRequest{})
	blob := make([]byte, 1<<20)
	rand.Read(blob)
	entries, err := d.client.Upload(ctx, sb.ID, []client.Upload{
		{Name: "data.bin", Content: bytes.NewReader(blob)},
		{Name: "notes.txt", Content: strings.NewReader("uploaded\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Path != client.UploadDir+"/data.bin" || entries[0].Size != int64(len(blob)) || entries[1].Owner != "user" {
		t.Errorf("uploaded: %+v", entries)
	}
	if res := d.exec(sb.ID, "cat user-uploads/notes.txt; stat -c %U user-uploads; sha256sum < user-uploads/data.bin"); res.Stdout != fmt.Sprintf("uploaded\nuser\n%x  -\n", sha256.Sum256(blob)) {
		t.Errorf("in the sandbox: %+v", res)
	}

	local := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(local, []byte("a,b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := d.cli("", "fs", "upload", sb.ID, local); code != 0 || out != client.UploadDir+"/report.csv\n" {
		t.Errorf("hutch fs upload: %d %q %q", code, out, stderr)
	}

	_, err = d.client.Upload(ctx, sb.ID, []client.Upload{
		{Name: "first.txt", Content: strings.NewReader("x")},
		{Name: "..", Content: strings.NewReader("y")},
	})
	if !client.IsInvalidArgument(err) {
		t.Errorf("an upload named ..: %v, want invalid_argument", err)
	}
	if res := d.exec(sb.ID, "ls user-uploads"); res.Stdout != "data.bin\nnotes.txt\nreport.csv\n" {
		t.Errorf("after a failed batch: %+v", res)
	}
}

func TestExecTimeoutKillsWholeTree(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		// The timeout leaves a loaded host time to print started (1 s
		// did not, beside the rest of the suite).
		start := time.Now()
		res, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{
			Command:  "setsid sleep 1000 & (sleep 1001 &) ; echo started; sleep 1002",
			TimeoutS: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.KilledBy != "timeout" || res.Stdout != "started\n" {
			t.Fatalf("result = %+v, want timed out after printing started", res)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("timeout of 5 s took %v", took)
		}
		// The setsid child and the double-forked one went too.
		left := d.exec(sb.ID, "ps -eo args= | grep '^sleep 10' || true")
		if left.Stdout != "" {
			t.Fatalf("processes that escaped the timeout: %q", left.Stdout)
		}
	})
}

// rawSyscalls calls bpf, keyctl and userfaultfd (x86_64 numbers) with
// python3 and prints each result and errno.
const rawSyscalls = `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for nr, args in ((321, (0, 0, 0)), (250, (0, 0, 0)), (323, (0,))):
    print(libc.syscall(nr, *args), ctypes.get_errno())
'`

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Under gVisor the agent listens in a host directory the sandbox sees and can
// write. A symlink planted at the socket's name must not make the daemon
// connect to a socket of the host's: the sandbox is taken for failed, and
// started again.
func TestPlantedSocketSymlinkIsRefused(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	d := startDaemon(t)
	sb := d.create(client.CreateSandboxRequest{Runtime: "gvisor"})

	trap := filepath.Join(t.TempDir(), "trap.sock")
	ln, err := net.Listen("unix", trap)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Close()
			accepted <- struct{}{}
		}
	}()

	// Root in the sandbox swaps the agent's socket for a symlink to the trap.
	if _, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{
		Command: "mv /.hutch/run/agent.sock /.hutch/run/real.sock && ln -s " + trap + " /.hutch/run/agent.sock",
		User:    "root",
	}); err != nil {
		t.Fatal(err)
	}
	// Idle agent connections are dropped by a restart of the daemon, so the
	// next call must dial the socket's name again.
	d.kill()
	d.start()
	// The daemon finds no agent behind the name: the sandbox is marked
	// error, and the next call starts it again, its socket made anew.
	if got, err := d.client.GetSandbox(t.Context(), sb.ID); err != nil || got.State != client.StateError {
		t.Fatalf("after the restart: %+v, %v; want error", got, err)
	}
	if res, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{Command: "test -S /.hutch/run/agent.sock && echo real"}); err != nil || res.Stdout != "real\n" {
		t.Errorf("exec after the restart: %+v, %v; want the sandbox started again on a socket of its own", res, err)
	}
	select {
	case <-accepted:
		t.Fatal("the daemon connected to a host socket through a symlink planted in the sandbox")
	case <-time.After(200 * time.Millisecond):
	}
}

// /v1/health names the runtimes, whether each is usable, and the default
// with why; a create that asks for an unknown runtime is refused plainly.
func TestHealthReportsRuntimes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	h, err := d.client.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.DefaultRuntime != "runc" || h.DefaultReason != "set by the configuration" {
		t.Errorf("default = %q (%q), want runc as the harness configures", h.DefaultRuntime, h.DefaultReason)
	}
	usable := map[string]bool{}
	for _, b := range h.Backends {
		usable[b.Name] = b.Usable
		if !b.Usable && b.Reason == "" {
			t.Errorf("backend %s is not usable and says no reason", b.Name)
		}
	}
	if !usable["runc"] || usable["gvisor"] != (runscBin != "") {
		t.Errorf("usable = %v, want runc, and gvisor exactly when runsc is here (%q)", usable, runscBin)
	}
	_, err = d.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{Runtime: "kata"})
	if !client.IsInvalidArgument(err) || !strings.Contains(err.Error(), "runtime must be one of gvisor, runc") {
		t.Errorf("create with runtime kata: %v, want invalid_argument naming the runtimes", err)
	}
}

// GET /v1/sandboxes/{id}/stats reads a sandbox's cgroups and writable layer.
func TestStats(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, MemoryMB: 256, Pids: 200})
		if res := d.exec(sb.ID, "head -c 3000000 /dev/urandom > blob && sync"); res.ExitCode != 0 {
			t.Fatalf("write blob: %+v", res)
		}
		st, err := d.client.Stats(t.Context(), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The cgroup's limit has room above the sandbox's own: under runc
		// for the agent's threads, made up front; under gVisor for its
		// host tasks (gVisor enforces the limit inside).
		wantPids := int64(200 + agentv1.Threads)
		if runtime == "gvisor" {
			wantPids = 200 + 512
		}
		if st.CPUTimeMS <= 0 || st.MemoryBytes <= 0 || st.MemoryPeakBytes < st.MemoryBytes ||
			st.MemoryLimitBytes != 256<<20 || st.Pids < 1 || st.PidsLimit != wantPids || st.DiskUsedBytes < 3000000 {
			t.Fatalf("stats = %+v, want CPU and memory used, limits 256 MiB and %d, at least 3 MB on disk", st, wantPids)
		}
		if err := d.client.DeleteSandbox(t.Context(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := d.client.Stats(t.Context(), sb.ID); !client.IsNotFound(err) {
			t.Fatalf("stats of a deleted sandbox: %v, want not_found", err)
		}
	})
}

// A command killed for the sandbox's memory limit says so, and the sandbox
// goes on with its files, under both runtimes: under gVisor the host's OOM
// killer takes the process's stub, not gVisor's kernel (see
// internal/runtime/oci/oom.go).
func TestExecKilledByMemoryLimit(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, MemoryMB: 128})
		if res := d.exec(sb.ID, "echo before > before.txt"); res.ExitCode != 0 {
			t.Fatalf("write: %+v", res)
		}
		for _, bomb := range []string{
			`python3 -c "b = bytearray(400 * 1024 * 1024)"`,
			"python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 20))'",
			// Memory written by the kernel for the process (a read from a
			// pipe): under gVisor its kernel, not the process's stub, holds
			// it on the host, and the daemon's own OOM kill must come first.
			"head -c 1000m /dev/zero | tail",
		} {
			res := d.exec(sb.ID, bomb)
			if !oomExit(runtime, res.ExitCode) || res.KilledBy != client.KilledByOOM {
				t.Fatalf("%s: %+v, want exit 137 killed_by oom", bomb, res)
			}
			if res := d.exec(sb.ID, "cat before.txt"); res.Stdout != "before\n" {
				t.Fatalf("after %s: %+v, want the file written before", bomb, res)
			}
		}
		if res := d.exec(sb.ID, "kill -9 $$"); res.KilledBy != client.KilledBySignal {
			t.Fatalf("a SIGKILL after the OOM kills: %+v, want killed_by signal", res)
		}
		got, err := d.client.GetSandbox(t.Context(), sb.ID)
		if err != nil || got.State != client.StateRunning {
			t.Errorf("after the OOM kills: %+v, %v; want running", got, err)
		}
	})
}

// oomExit reports whether exit is what a command killed for its memory
// ends with: 137, or under gVisor also 139 or 135, when the host's OOM
// kill of a process's stub meets one of its page faults (see
// backend.LimitHits.OOMMayFault).
func oomExit(runtime string, exit int) bool {
	return exit == 137 || runtime == "gvisor" && (exit == 139 || exit == 135)
}

// Files given at create are in the workspace, the sandbox user's, before
// the first command, under each runtime; hutch create --file sends them,
// and --files-from a directory packed as a tar.
func TestCreateWithFiles(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	src := filepath.Join(t.TempDir(), "local.txt")
	if err := os.WriteFile(src, []byte("from the CLI\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if err := os.MkdirAll(filepath.Join(project, "app", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "app", "bin", "run"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("app/bin/run", filepath.Join(project, "run")); err != nil {
		t.Fatal(err)
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Files: map[string]string{"src/main.py": "print('hi')\n"}})
		res := d.exec(sb.ID, `python3 src/main.py; stat -c '%U %a' src src/main.py; echo x > src/written`)
		if res.ExitCode != 0 || res.Stdout != "hi\nuser 755\nuser 644\n" {
			t.Errorf("files at create: %+v", res)
		}
		out, stderr, code := d.cli("", "create", "--runtime", runtime, "--file", "in/local.txt="+src)
		if code != 0 {
			t.Fatalf("hutch create --file: %d %q", code, stderr)
		}
		id := strings.TrimSpace(out)
		d.sandboxIDs = append(d.sandboxIDs, id)
		if res := d.exec(id, "cat in/local.txt"); res.Stdout != "from the CLI\n" {
			t.Errorf("hutch create --file: %+v", res)
		}

		out, stderr, code = d.cli("", "create", "--runtime", runtime, "--files-from", project)
		if code != 0 {
			t.Fatalf("hutch create --files-from: %d %q", code, stderr)
		}
		id = strings.TrimSpace(out)
		d.sandboxIDs = append(d.sandboxIDs, id)
		if res := d.exec(id, "./run; stat -c '%U %a %F' app/bin/run run"); res.Stdout != "ran\nuser 755 regular file\nuser 777 symbolic link\n" {
			t.Errorf("hutch create --files-from: %+v", res)
		}
	})
	// A tar that would write through a symlink out of the workspace is
	// refused whole, and nothing is left of the sandbox.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, h := range []*tar.Header{
		{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		{Name: "etc/cron.d/evil", Typeflag: tar.TypeReg, Mode: 0o644},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := d.client.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{FilesTar: tb.Bytes()})
	if !client.IsInvalidArgument(err) || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("a tar writing through a symlink: %v, want invalid_argument", err)
	}
	if after, err := d.client.ListSandboxes(t.Context()); err != nil || len(after) != len(before) {
		t.Errorf("sandboxes after a refused create: %d, %v; want %d", len(after), err, len(before))
	}
}

// A snapshot of a running sandbox holds its files as they were, and new
// sandboxes start from it; a fork makes copies of a sandbox as it is, each
// its own. The sandbox runs on through both.
func TestSnapshotAndFork(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Env: map[string]string{"KEPT": "env"}})
		if res := d.exec(sb.ID, "echo one > a.txt && mkdir -p ~/.local/lib && echo pkg > ~/.local/lib/p"); res.ExitCode != 0 {
			t.Fatalf("write files: %+v", res)
		}
		name := "snap-" + runtime
		snap, err := d.client.SnapshotSandbox(t.Context(), sb.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Source != "snapshot" || snap.Sandbox != sb.ID || !strings.HasPrefix(snap.Parent, "host@") {
			t.Errorf("snapshot: %+v", snap)
		}
		// The sandbox runs on, and what it writes now is not in the snapshot.
		if res := d.exec(sb.ID, "echo two > a.txt"); res.ExitCode != 0 {
			t.Fatalf("the sandbox after its snapshot: %+v", res)
		}
		from := d.create(client.CreateSandboxRequest{Runtime: runtime, FromSnapshot: name})
		if res := d.exec(from.ID, `cat a.txt ~/.local/lib/p; stat -c %U a.txt; hostname`); res.Stdout != "one\npkg\nuser\n"+from.ID+"\n" {
			t.Errorf("a sandbox from the snapshot: %+v", res)
		}

		forks, err := d.client.ForkSandbox(t.Context(), sb.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forks {
			d.sandboxIDs = append(d.sandboxIDs, f.ID)
		}
		if len(forks) != 2 || forks[0].Runtime != runtime || forks[0].Metadata["forked_from"] != sb.ID {
			t.Fatalf("forks: %+v", forks)
		}
		d.exec(forks[0].ID, "echo mine > a.txt")
		for i, want := range []string{"mine\nenv\n", "two\nenv\n"} {
			if res := d.exec(forks[i].ID, `cat a.txt; echo "$KEPT"`); res.Stdout != want {
				t.Errorf("fork %d: %+v, want %q", i, res, want)
			}
		}
		if res := d.exec(sb.ID, "cat a.txt"); res.Stdout != "two\n" {
			t.Errorf("the forked sandbox: %+v", res)
		}

		_, err = d.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{Runtime: runtime, FromSnapshot: "host"})
		if !client.IsInvalidArgument(err) {
			t.Errorf("from_snapshot of a template that is not a snapshot: %v", err)
		}
		if _, err := d.client.SnapshotSandbox(t.Context(), sb.ID, "host"); !client.IsInvalidArgument(err) {
			t.Errorf("a snapshot named host: %v", err)
		}
	})
}

// A fork carries its source's background processes: under gVisor they go
// on from the snapshot's memory (the same pid, counting on from where the
// source was), under runc they start again, as after a resume.
func TestForkKeepsProcesses(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// The count is renamed into place: a read never sees the file empty.
	const counter = "import os, time\ni = 0\nwhile True:\n    i += 1\n    open('/tmp/count.new', 'w').write(str(i))\n    os.replace('/tmp/count.new', '/tmp/count')\n    time.sleep(0.05)\n"
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		p, err := d.client.StartProcess(ctx, sb.ID, client.StartProcessRequest{Name: "counter", Cmd: []string{"python3", "-c", counter}})
		if err != nil {
			t.Fatal(err)
		}
		count := func(id string) int {
			n, _ := strconv.Atoi(d.exec(id, "cat /tmp/count").Stdout)
			return n
		}
		for deadline := time.Now().Add(20 * time.Second); count(sb.ID) < 40; {
			if time.Now().After(deadline) {
				t.Fatalf("the counter in the source did not reach 40: %d", count(sb.ID))
			}
			time.Sleep(100 * time.Millisecond)
		}
		forks, err := d.client.ForkSandbox(ctx, sb.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		fork := forks[0].ID
		d.sandboxIDs = append(d.sandboxIDs, fork)
		procs, err := d.client.ListProcesses(ctx, fork)
		if err != nil || len(procs) != 1 || procs[0].Name != "counter" || procs[0].Status != client.ProcessRunning {
			t.Fatalf("the fork's processes: %+v, %v", procs, err)
		}
		snap, err := d.client.GetTemplate(ctx, "fork-"+sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if runtime != "gvisor" {
			if snap.MemoryRuntime != "" {
				t.Errorf("a %s snapshot says it holds memory: %+v", runtime, snap)
			}
			return
		}
		if snap.MemoryRuntime != "gvisor" {
			t.Errorf("the fork's snapshot holds no memory: %+v", snap)
		}
		// The image holds the sandbox's secrets as its memory did. (A
		// fork's snapshot is kept under its workspace's qualified name.)
		img := filepath.Join(d.dataDir, "templates", snap.Name+"~default", snap.Version, "memory")
		if fi, err := os.Stat(img); err != nil {
			t.Errorf("the memory image: %v", err)
		} else if fi.Mode().Perm() != 0o700 {
			t.Errorf("the memory image %s has mode %v; want root's alone (0700)", img, fi.Mode())
		}
		// A fresh start would count from 1, at 20 a second.
		if n := count(fork); procs[0].Pid != p.Pid || n < 40 {
			t.Errorf("the fork's counter: pid %d at %d, want pid %d counting on from 40 or more", procs[0].Pid, n, p.Pid)
		}
	})
}

// A volume outlives the sandboxes that mount it: what one writes, a later
// one (of the other runtime too) reads, read-only when it asks; a volume in
// use cannot be removed.
func TestVolumes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if out, stderr, code := d.cli("", "volume", "create", "ws"); code != 0 || strings.TrimSpace(out) != "ws" {
		t.Fatalf("hutch volume create: %d %q %q", code, out, stderr)
	}
	writer := d.create(client.CreateSandboxRequest{Runtime: "runc", Volumes: []client.VolumeMount{{Name: "ws", Path: "/home/user/workspace/shared"}}})
	if res := d.exec(writer.ID, `echo kept > shared/note && mkdir shared/dir && stat -c %U shared/note`); res.ExitCode != 0 || res.Stdout != "user\n" {
		t.Fatalf("write to the volume: %+v", res)
	}
	if err := d.client.DeleteSandbox(t.Context(), writer.ID); err != nil {
		t.Fatal(err)
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		out, stderr, code := d.cli("", "create", "--runtime", runtime, "--volume", "ws:/mnt/ws:ro")
		if code != 0 {
			t.Fatalf("hutch create --volume: %d %q", code, stderr)
		}
		id := strings.TrimSpace(out)
		d.sandboxIDs = append(d.sandboxIDs, id)
		res := d.exec(id, `cat /mnt/ws/note; stat -c %U /mnt/ws/note; echo x > /mnt/ws/other`)
		if res.ExitCode == 0 || !strings.HasPrefix(res.Stdout, "kept\nuser\n") || !strings.Contains(res.Stderr, "Read-only") {
			t.Errorf("a read-only volume: %+v", res)
		}
		if err := d.client.DeleteVolume(t.Context(), "ws"); !client.IsConflict(err) {
			t.Errorf("removing a volume in use: %v, want conflict", err)
		}
		// Suspended and resumed, it still has its volume.
		if _, err := d.client.SuspendSandbox(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if res := d.exec(id, "cat /mnt/ws/note"); res.Stdout != "kept\n" {
			t.Errorf("the volume after a resume: %+v", res)
		}
		if err := d.client.DeleteSandbox(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	})
	// A keyed sandbox that expired is made again from its key with its
	// workspace volume in place.
	// Its lifetime is cut to 1 s once it has written (a create on a loaded
	// host took longer than 1 s).
	keyed := client.CreateSandboxRequest{Key: "chat-1",
		Volumes: []client.VolumeMount{{Name: "ws", Path: "/home/user/workspace/ws"}}}
	first := d.create(keyed)
	d.exec(first.ID, "echo from-the-first > ws/turn")
	if _, err := d.client.UpdateSandbox(t.Context(), first.ID, client.UpdateSandboxRequest{MaxLifetimeS: 1}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := d.client.GetSandbox(t.Context(), first.ID); client.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a sandbox with max_lifetime_s 1 still there 10 s on")
		}
	}
	second := d.create(keyed)
	if res := d.exec(second.ID, "cat ws/turn"); second.ID == first.ID || res.Stdout != "from-the-first\n" {
		t.Errorf("made again from its key: %s after %s, %+v", second.ID, first.ID, res)
	}
	if err := d.client.DeleteSandbox(t.Context(), second.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{Volumes: []client.VolumeMount{{Name: "ws", Path: "/etc"}}}); !client.IsInvalidArgument(err) {
		t.Errorf("a volume over /etc: %v, want invalid argument", err)
	}
	if _, err := d.client.CreateSandbox(t.Context(), client.CreateSandboxRequest{Volumes: []client.VolumeMount{{Name: "nope"}}}); !client.IsNotFound(err) {
		t.Errorf("a missing volume: %v, want not found", err)
	}
	if out, stderr, code := d.cli("", "volume", "rm", "ws"); code != 0 || strings.TrimSpace(out) != "ws" {
		t.Fatalf("hutch volume rm: %d %q %q", code, out, stderr)
	}
	if vols, err := d.client.ListVolumes(t.Context()); err != nil || len(vols) != 0 {
		t.Errorf("volumes after rm: %+v, %v", vols, err)
	}
}
