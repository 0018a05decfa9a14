package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID",
		Short: "Show a sandbox",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			sb, err := c.GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			act, err := c.Activity(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(struct {
					*client.Sandbox
					Activity *client.Activity `json:"activity"`
				}{sb, act})
			}
			t := newTable(a.stdout, "ID:", sb.ID)
			t.row("Template:", sb.Template)
			t.row("Runtime:", sb.Runtime)
			t.row("Network:", describePolicy(sb.Network))
			t.row("State:", sb.State)
			if sb.StateReason != "" {
				t.row("State reason:", sb.StateReason)
			}
			t.row("CPUs:", strconv.FormatFloat(sb.CPUs, 'f', -1, 64))
			t.row("Memory:", fmt.Sprintf("%d MiB", sb.MemoryMB))
			t.row("Pids:", strconv.FormatInt(sb.Pids, 10))
			t.row("Disk:", fmt.Sprintf("%d MiB", sb.DiskMB))
			t.row("Idle timeout:", (time.Duration(sb.IdleTimeoutS) * time.Second).String())
			t.row("Idle action:", sb.IdleAction)
			if !sb.ExpiresAt.IsZero() {
				t.row("Expires:", sb.ExpiresAt.Local().Format(time.RFC3339))
			}
			busy := "idle"
			if act.Busy {
				busy = "busy"
			}
			t.row("Activity:", busy+", last "+act.LastActivityAt.Local().Format(time.RFC3339))
			for _, r := range act.Reasons {
				t.row("", r)
			}
			if act.ActionAt != nil {
				t.row("Idle action at:", act.ActionAt.Local().Format(time.RFC3339))
			}
			t.row("Created:", sb.CreatedAt.Local().Format(time.RFC3339))
			t.row("Updated:", sb.UpdatedAt.Local().Format(time.RFC3339))
			if len(sb.Metadata) > 0 {
				t.row("Metadata:")
				for _, k := range slices.Sorted(maps.Keys(sb.Metadata)) {
					t.row("  "+k+":", sb.Metadata[k])
				}
			}
			return t.flush()
		},
	}
}
