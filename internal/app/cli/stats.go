package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/spf13/cobra"
)

func (a *app) newStatsCmd() *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "stats ID",
		Short: "Show what a running sandbox uses: CPU time, memory, processes, disk, network",
		Long: "Show what a running sandbox uses now; with --watch, what it used over time:\n" +
			"the samples the daemon kept, then each new one as it is taken, until interrupted.",
		Args: exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			if watch {
				return a.watchStats(cmd.Context(), c, args[0])
			}
			st, err := c.Stats(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(st)
			}
			t := newTable(a.stdout, "CPU time:", (time.Duration(st.CPUTimeMS) * time.Millisecond).String())
			t.row("Memory:", mib(st.MemoryBytes)+" of "+limit(st.MemoryLimitBytes, mib)+", peak "+mib(st.MemoryPeakBytes))
			t.row("Processes:", strconv.FormatInt(st.Pids, 10)+" of "+limit(st.PidsLimit, func(n int64) string { return strconv.FormatInt(n, 10) }))
			t.row("Disk used:", mib(st.DiskUsedBytes))
			t.row("Network:", fmt.Sprintf("%s out, %s in, %d connections", mib(st.NetworkBytesOut), mib(st.NetworkBytesIn), st.NetworkConnections))
			return t.flush()
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print the samples kept of what it used, then each new one, until interrupted (-o json: one object a line)")
	return cmd
}

// watchStats prints sandbox id's samples, then each new one as the daemon
// takes it, until ctx ends.
func (a *app) watchStats(ctx context.Context, c *client.Client, id string) error {
	var since time.Time
	if !a.jsonOutput() {
		fmt.Fprintf(a.stdout, "%-8s  %6s  %-22s  %-10s  %5s  %-10s  %-10s\n", "TIME", "CPU", "MEMORY", "DISK", "PIDS", "NET IN", "NET OUT")
	}
	for {
		m, err := c.SandboxMetrics(ctx, id, since)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		for _, smp := range m.Samples {
			if err := a.printSample(smp); err != nil {
				return err
			}
			since = smp.Time
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(max(time.Second, time.Duration(m.IntervalS*float64(time.Second)))):
		}
	}
}

// printSample prints one sample: a line of the table, or of JSON.
func (a *app) printSample(smp client.MetricsSample) error {
	if a.jsonOutput() {
		b, err := json.Marshal(smp)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%-8s  %5.1f%%  %-22s  %-10s  %5d  %-10s  %-10s\n",
		smp.Time.Local().Format(time.TimeOnly), smp.CPUPercent, mib(smp.MemoryBytes)+" of "+mib(smp.MemoryLimitBytes),
		mib(smp.DiskUsedBytes), smp.Pids, mib(smp.NetworkBytesIn), mib(smp.NetworkBytesOut))
	return err
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// limit formats a limit, -1 being none.
func limit(n int64, format func(int64) string) string {
	if n < 0 {
		return "no limit"
	}
	return format(n)
}
