package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// A sandbox with no call and no running command for its idle timeout goes;
// one running a command stays.
func TestIdleTimeout(t *testing.T) {
	d := startDaemon(t)
	idle := d.create(client.CreateSandboxRequest{IdleTimeoutS: 1})
	busy := d.create(client.CreateSandboxRequest{IdleTimeoutS: 1})

	done := make(chan error, 1)
	go func() {
		_, err := d.client.Exec(t.Context(), busy.ID, client.ExecRequest{Command: "sleep 4"})
		done <- err
	}()

	deadline := time.Now().Add(4 * time.Second)
	for {
		_, err := d.client.GetSandbox(t.Context(), idle.ID)
		if client.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle sandbox still there after 4 s (idle timeout 1 s): %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("the busy sandbox's command was cut short: %v", err)
	}
	if _, err := d.client.GetSandbox(t.Context(), busy.ID); err != nil {
		t.Fatalf("a sandbox running a command was taken as idle: %v", err)
	}
}

// Streaming a flood of output goes at the reader's pace without the daemon
// holding it in memory.
func TestStreamFloodKeepsDaemonMemoryFlat(t *testing.T) {
	d := startDaemon(t)
	sb := d.create(client.CreateSandboxRequest{})
	const total = 512 << 20
	var got int64
	exit, err := d.client.ExecStream(t.Context(), sb.ID, client.ExecRequest{Command: "head -c " + strconv.Itoa(total) + " /dev/zero | tr '\\0' x"},
		func(ev client.ExecEvent) error {
			got += int64(len(ev.Data))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if exit.ExitCode != 0 || got != total {
		t.Fatalf("streamed %d bytes, exit %d; want %d and 0", got, exit.ExitCode, total)
	}
	if peak := peakRSS(t, d.cmd.Process.Pid); peak > 100<<20 {
		t.Fatalf("daemon's peak RSS %d MiB after streaming 512 MiB: output is being buffered", peak>>20)
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
