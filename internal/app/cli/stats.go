package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) newStatsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats ID",
		Short: "Show what a running sandbox uses: CPU time, memory, processes, disk, network",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
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
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// limit formats a limit, -1 being none.
func limit(n int64, format func(int64) string) string {
	if n < 0 {
		return "no limit"
	}
	return format(n)
}
