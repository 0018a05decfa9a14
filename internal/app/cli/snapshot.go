package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) newSnapshotCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot ID NAME",
		Short: "Snapshot a sandbox as template NAME",
		Long: "Copy a sandbox's files as they are now (it is frozen for the copy) into a\n" +
			"template of source snapshot, printing its name and version. Sandboxes start\n" +
			"from it with hutch create --from-snapshot NAME. Under gVisor the snapshot\n" +
			"holds the sandbox's memory and processes too: gVisor sandboxes made from it\n" +
			"go on from there; other runtimes start afresh on its files.",
		Args: exactArgs(2, "a sandbox ID and a snapshot name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			t, err := c.SnapshotSandbox(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(t)
			}
			_, err = fmt.Fprintf(a.stdout, "%s %s\n", t.Name, t.Version)
			return err
		},
	}
}

func (a *app) newForkCmd() *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "fork ID [-n N]",
		Short: "Make copies of a sandbox as it is now",
		Long: "Make N new sandboxes (1 by default, at most 100) from a sandbox's files as\n" +
			"they are now, with its runtime, limits, env, timers and background\n" +
			"processes, printing their IDs. Under gVisor each copy goes on with the\n" +
			"sandbox's memory and processes; under runc its background processes start\n" +
			"again, as after a resume. A copy that fails is said on stderr, the others\n" +
			"kept; the exit status is 1 when any failed.",
		Args: exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			res, err := c.Fork(cmd.Context(), args[0], count)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(res)
			}
			for _, sb := range res.Sandboxes {
				if _, err := fmt.Fprintln(a.stdout, sb.ID); err != nil {
					return err
				}
			}
			for _, e := range res.Errors {
				fmt.Fprintf(a.stderr, "copy %d of %d: %s: %s\n", e.Copy, count, e.Code, e.Message)
			}
			if len(res.Errors) > 0 {
				return fmt.Errorf("%d of %d copies failed", len(res.Errors), count)
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&count, "count", "n", 1, "how many copies")
	return cmd
}
