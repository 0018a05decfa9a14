package e2e

import (
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/runtime/oci"
)

// Attacks on the boundary between a host's other users and what sandboxes
// wrote (issue 36, docs/security.md).

// Finding 11: a setuid-root program written by a sandbox's root (a
// snapshot of it, a volume's file) sat on a host path every local user
// could traverse (template dirs 0755, data dir 0711): running it was root
// on the host. A host user reaches nothing under the templates and
// volumes dirs, under each runtime, while sandboxes still use both.
func TestAttackSetuidReachableByLocalUser(t *testing.T) {
	t.Parallel()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("this test runs as another user with setpriv (util-linux): not found")
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		ctx := t.Context()
		if _, err := d.client.CreateVolume(ctx, "loot"); err != nil {
			t.Fatal(err)
		}
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Volumes: []client.VolumeMount{{Name: "loot", Path: "/mnt/loot"}}})
		plant := "cp /bin/sh /home/user/rootsh && chmod 4755 /home/user/rootsh && cp /bin/sh /mnt/loot/rootsh && chmod 4755 /mnt/loot/rootsh"
		if res, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: plant, User: "root"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("plant setuid programs: %+v, %v", res, err)
		}
		if _, err := d.client.SnapshotSandbox(ctx, sb.ID, "loot"); err != nil {
			t.Fatal(err)
		}
		// The root sees what a host user would aim at: the planted files,
		// setuid, in the snapshot's root and the volume.
		var planted []string
		for _, dir := range []string{"templates", "volumes"} {
			_ = filepath.WalkDir(filepath.Join(d.dataDir, dir), func(p string, e fs.DirEntry, err error) error {
				if err == nil && e.Name() == "rootsh" {
					if fi, err := os.Stat(p); err == nil && fi.Mode()&fs.ModeSetuid != 0 {
						planted = append(planted, p)
					}
				}
				return nil
			})
		}
		if len(planted) < 2 {
			t.Fatalf("the setuid programs planted in the snapshot and the volume: %q, want both", planted)
		}
		for _, p := range append(planted, filepath.Join(d.dataDir, "templates")+"/.", filepath.Join(d.dataDir, "volumes")+"/.") {
			// #nosec G204 -- the test's own paths
			out, err := exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/sh", "-c", `test -e "$1" && echo reached`, "sh", p).CombinedOutput()
			if strings.Contains(string(out), "reached") || err == nil {
				t.Errorf("a host user (65534) reaches %s: %q, %v", p, out, err)
			}
		}
		// Sandboxes still use both: one from the snapshot, with the
		// volume.
		again := d.create(client.CreateSandboxRequest{Runtime: runtime, Template: "loot", Volumes: []client.VolumeMount{{Name: "loot", Path: "/mnt/loot"}}})
		if res, _ := d.client.Exec(ctx, again.ID, client.ExecRequest{Command: "test -u /home/user/rootsh && test -u /mnt/loot/rootsh && echo ok", User: "root"}); res == nil || res.Stdout != "ok\n" {
			t.Errorf("a sandbox of the snapshot, with the volume: %+v", res)
		}
	})
}

// Finding 16, the agent's socket: under gVisor the agent makes its socket
// in a directory the sandbox's root can write, on the host. Root there
// replaces it with a symlink to a host socket (here one the test listens
// on): the daemon's next connections to the agent must reach nothing on
// the host. Twenty calls at once need more connections than the daemon
// keeps idle, so it dials again after the plant.
func TestAttackAgentSocketReplaced(t *testing.T) {
	t.Parallel()
	requireGvisor(t)
	d := startDaemon(t)
	ctx := t.Context()
	host := filepath.Join(t.TempDir(), "host.sock")
	ln, err := net.Listen("unix", host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var reached atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			conn.Close()
		}
	}()
	sb := d.create(client.CreateSandboxRequest{Runtime: "gvisor"})
	socket := oci.AgentSocketDir + "/" + oci.AgentSocketName
	plant := "rm -f " + socket + " && ln -s " + host + " " + socket + " && test -L " + socket + " && echo planted"
	if res, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: plant, User: "root"}); err != nil || res.Stdout != "planted\n" {
		t.Fatalf("plant a symlink in the agent socket's place: %+v, %v", res, err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 20 {
		wg.Go(func() {
			if _, err := d.client.Exec(ctx, sb.ID, client.ExecRequest{Command: "sleep 1"}); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() == 0 {
		t.Fatal("twenty calls at once all went through: the daemon made no new connection to the agent, so the plant was not tried")
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the daemon connected %d times to the host socket the sandbox's root linked in the agent's place", n)
	}
}
