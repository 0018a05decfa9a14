package e2e

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// Writing past a sandbox's disk limit fails inside it with ENOSPC, /tmp
// included, and nothing else notices: its neighbour writes, the daemon
// answers. Deleting the file gives the space back.
func TestDiskFillStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	forEachRuntimeParallel(t, func(t *testing.T, runtime string) {
		d := startDaemon(t)
		full := d.create(client.CreateSandboxRequest{Runtime: runtime, DiskMB: 128})
		neighbour := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if neighbour.DiskMB != 2048 || full.DiskMB != 128 {
			t.Fatalf("disk_mb = %d and %d, want the default 2048 and 128", neighbour.DiskMB, full.DiskMB)
		}

		res := d.exec(full.ID, "dd if=/dev/zero of=/tmp/fill bs=1M count=1024")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
			t.Fatalf("filling /tmp past 128 MiB: %+v, want ENOSPC", res)
		}
		st, err := d.client.Stats(t.Context(), full.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.DiskUsedBytes < 100<<20 || st.DiskUsedBytes > 128<<20 {
			t.Errorf("disk used when full: %d bytes, want 100–128 MiB", st.DiskUsedBytes)
		}
		// A full disk is the sandbox's problem only.
		if _, err := d.client.Health(t.Context()); err != nil {
			t.Fatalf("the daemon: %v", err)
		}
		if got := d.exec(neighbour.ID, "head -c 200000000 /dev/zero > big && stat -c %s big"); got.Stdout != "200000000\n" {
			t.Fatalf("the neighbour writing 200 MB: %+v", got)
		}
		if got := d.exec(full.ID, "head -c 4000000 /dev/zero > /home/user/more"); got.ExitCode == 0 {
			t.Errorf("a full sandbox could still write a file: %+v", got)
		}

		if got := d.exec(full.ID, "rm /tmp/fill && echo again > /home/user/again && cat /home/user/again"); got.Stdout != "again\n" {
			t.Fatalf("writing after freeing space: %+v", got)
		}
		// btrfs counts freed space free at its next commit (every 30 s),
		// ext4 at once.
		for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			st, err := d.client.Stats(t.Context(), full.ID)
			if err == nil && st.DiskUsedBytes <= 16<<20 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("disk used 40 s after rm: %+v (%v), want the space back", st, err)
				break
			}
		}
	})
}

// A sandbox's disk grows in place, running or suspended, its files kept:
// what did not fit fits after; it never shrinks. Under both runtimes.
func TestDiskGrows(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	forEachRuntime(t, func(t *testing.T, runtime string) {
		ctx := t.Context()
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, DiskMB: 256})
		size := func() int64 {
			out := d.exec(sb.ID, "df -m --output=size /tmp | tail -1").Stdout
			n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
			return n
		}
		if res := d.exec(sb.ID, "head -c 150M /dev/zero > first && sync"); res.ExitCode != 0 {
			t.Fatalf("150 MB on a 256 MiB disk: %+v", res)
		}
		if res := d.exec(sb.ID, "head -c 300M /dev/zero > second; rc=$?; rm -f second; sync; exit $rc"); res.ExitCode == 0 {
			t.Fatalf("300 MB more fit on a 256 MiB disk: %+v", res)
		}
		if _, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{DiskMB: 1024}); err != nil {
			t.Fatal(err)
		}
		if got := size(); got < 900 {
			t.Errorf("the running sandbox's disk is %d MiB after growing to 1024", got)
		}
		if res := d.exec(sb.ID, "head -c 300M /dev/zero > second && sync && stat -c %s first"); res.ExitCode != 0 || res.Stdout != "157286400\n" {
			t.Errorf("300 MB more on the grown disk, the first file kept: %+v", res)
		}
		if _, err := d.client.SuspendSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		got, err := d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{DiskMB: 1536})
		if err != nil || got.DiskMB != 1536 || got.State != "suspended" {
			t.Fatalf("grow the suspended sandbox's disk: %+v, %v", got, err)
		}
		if got := size(); got < 1400 {
			t.Errorf("after the resume the disk is %d MiB, want 1536", got)
		}
		_, err = d.client.UpdateSandbox(ctx, sb.ID, client.UpdateSandboxRequest{DiskMB: 512})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != "failed_precondition" {
			t.Errorf("shrinking the disk: %v, want failed_precondition", err)
		}
	})
}
