package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestAttackNoRuncWhileGvisorBuilds: ./setup starts the daemon while
// gVisor's runsc is still being built in the background (issue 37). gVisor,
// the default, is then pending, never replaced by the weaker runc: a create
// that names no runtime answers unavailable saying so, hutch health shows
// it, hutch run waits for it, and once runsc is there creates get gVisor,
// with no restart.
func TestAttackNoRuncWhileGvisorBuilds(t *testing.T) {
	requireGvisor(t)
	t.Parallel()
	runsc := filepath.Join(t.TempDir(), "runsc")
	build := exec.Command("sleep", "600") // stands for make runsc
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = build.Process.Kill(); _ = build.Wait() })
	marker := runsc + ".building"
	if err := os.WriteFile(marker, []byte(strconv.Itoa(build.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, "--runtime=", "--runsc", runsc)
	ctx := t.Context()

	h, err := d.client.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.DefaultRuntime != "gvisor" || !pendingBackend(h, "gvisor") {
		t.Fatalf("health while runsc builds: default %q (%s), backends %+v; want gvisor, pending", h.DefaultRuntime, h.DefaultReason, h.Backends)
	}
	if out, _, code := d.cli("", "health"); code != 0 || !strings.Contains(out, "runtime gvisor: being set up: "+runsc+" is being built") {
		t.Errorf("hutch health while runsc builds: exit %d:\n%s", code, out)
	}
	_, err = d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Template: "host"})
	if !client.IsUnavailable(err) || !strings.Contains(err.Error(), "not ready yet") {
		t.Fatalf("create while runsc builds: %v; want unavailable, saying gvisor is not ready yet", err)
	}
	if sb, err := d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Template: "host", Runtime: "runc"}); err != nil {
		t.Errorf("create asking for runc meanwhile: %v", err)
	} else {
		d.sandboxIDs = append(d.sandboxIDs, sb.ID)
	}

	type result struct {
		stdout, stderr string
		code           int
	}
	ran := make(chan result, 1)
	go func() {
		stdout, stderr, code := d.cli("", "run", "--template", "host", "--", "uname", "-r")
		ran <- result{stdout, stderr, code}
	}()
	time.Sleep(3 * time.Second) // the CLI is waiting by now
	select {
	case r := <-ran:
		t.Fatalf("hutch run ended before runsc was built: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	default:
	}
	// The build ends: the binary first, then the marker goes.
	if err := os.Symlink(runscBin, runsc); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	r := <-ran
	if r.code != 0 || !strings.Contains(r.stderr, "runtime gvisor is being set up") || !strings.Contains(r.stdout, "gvisor") {
		t.Errorf("hutch run across the build: exit %d, stdout %q, stderr %q; want it to wait, say so, and run under gVisor", r.code, r.stdout, r.stderr)
	}
	if waited := time.Since(built); waited > 20*time.Second {
		t.Errorf("hutch run went on %v after runsc was built; want within a few of its polls, not the health's %v cache", waited.Round(time.Second), 30*time.Second)
	}
	sb := d.create(client.CreateSandboxRequest{Template: "host"})
	if sb.Runtime != "gvisor" {
		t.Errorf("create once runsc is built: runtime %q, want gvisor", sb.Runtime)
	}
}

// pendingBackend says whether health lists backend name as pending.
func pendingBackend(h *client.Health, name string) bool {
	for _, b := range h.Backends {
		if b.Name == name {
			return b.Pending && !b.Usable
		}
	}
	return false
}
