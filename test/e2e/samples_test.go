package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestSandboxMetrics runs a CPU loop in a sandbox under each runtime and
// reads what it used over time: through the REST API, samples near its
// CPU limit with its memory, disk and limits; through hutch stats
// --watch, the same samples as JSON lines as they are taken; through the
// unmodified E2B SDK's getMetrics, the same. It runs alone on the host
// (make test's ALONE): beside the rest, a loop gets no whole CPU.
func TestSandboxMetrics(t *testing.T) {
	d := startDaemonWith(t, "--sample-interval", "500ms")
	scripts := e2bScripts(t)
	env, _ := e2bEnv(t, d)
	eachE2BRuntime(t, d, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, CPUs: 1})
		began := time.Now()
		if _, err := d.client.StartProcess(t.Context(), sb.ID, client.StartProcessRequest{Name: "spin", Command: "while :; do :; done"}); err != nil {
			t.Fatal(err)
		}
		var m *client.SandboxMetrics
		waitFor(t, 30*time.Second, "three samples of the loop", func() bool {
			var err error
			if m, err = d.client.SandboxMetrics(t.Context(), sb.ID, began); err != nil {
				t.Fatal(err)
			}
			return len(m.Samples) >= 4
		})
		if m.IntervalS != 0.5 {
			t.Errorf("interval_s = %v, want the daemon's 0.5", m.IntervalS)
		}
		// The first sample after the start may hold part of a second
		// before the loop; the CPU of the others is its one CPU's.
		peak := 0.0
		for _, smp := range m.Samples[1:] {
			peak = max(peak, smp.CPUPercent)
		}
		if peak < 60 || peak > 110 {
			t.Errorf("a CPU loop's samples peak at %.1f%% of its CPU limit, want near 100%%: %+v", peak, m.Samples)
		}
		last := m.Samples[len(m.Samples)-1]
		if last.CPUs != 1 || last.MemoryBytes <= 0 || last.MemoryLimitBytes != sb.MemoryMB<<20 ||
			last.DiskLimitBytes != sb.DiskMB<<20 || last.DiskUsedBytes < 0 || last.Pids < 2 {
			t.Errorf("the last sample: %+v, want its limits (1 CPU, %d MiB, %d MiB of disk) and use", last, sb.MemoryMB, sb.DiskMB)
		}
		for i := 1; i < len(m.Samples); i++ {
			if !m.Samples[i].Time.After(m.Samples[i-1].Time) {
				t.Fatalf("samples out of order: %+v", m.Samples)
			}
		}
		later, err := d.client.SandboxMetrics(t.Context(), sb.ID, last.Time)
		if err != nil {
			t.Fatal(err)
		}
		for _, smp := range later.Samples {
			if !smp.Time.After(last.Time) {
				t.Errorf("since=%s answered a sample of %s", last.Time, smp.Time)
			}
		}

		// hutch stats --watch -o json prints them, then follows.
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		cmd := exec.CommandContext(ctx, hutchBin, "stats", "--watch", "-o", "json", sb.ID)
		cmd.Env = append(os.Environ(), "HUTCH_URL=http://"+d.addr, "HUTCH_API_KEY="+d.key)
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) } // as Ctrl-C
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil && ctx.Err() == nil {
			t.Fatalf("hutch stats --watch: %v, %s", err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < len(m.Samples)+2 {
			t.Errorf("hutch stats --watch printed %d lines in 2.5 s, want the %d kept and the new ones: %s %s", len(lines), len(m.Samples), out, stderr.String())
		}
		for _, l := range lines {
			var smp client.MetricsSample
			if err := json.Unmarshal([]byte(l), &smp); err != nil || smp.Time.IsZero() {
				t.Errorf("hutch stats --watch -o json printed %q: %v", l, err)
			}
		}

		// E2B's getMetrics, of a sandbox of the E2B SDK's own.
		f := scripts.run(t, env, "metrics.mjs") // on the daemon's default runtime, this one
		d.sandboxIDs = append(d.sandboxIDs, f.sandboxIDs...)
		f.want(t, "getMetrics", map[string]any{"cpuCount": 1, "memUsed": true, "dates": true})
		f.within(t, "getMetrics", "samples", 5, 14)
		f.within(t, "getMetrics", "maxCpu", 60, 110)
		f.within(t, "getMetrics", "memTotal", 64<<20, 64<<30)
		f.within(t, "getMetrics", "diskTotal", 64<<20, 1<<40)
	})
}
