package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete"},
		Short:   "Delete sandboxes",
		Long:    "Delete each sandbox, printing its ID once deleted. Failures are reported and\nmake the exit code 1; the other sandboxes are still deleted.",
		Args:    minArgs(1, "one or more sandbox IDs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			failed := false
			for _, id := range args {
				err := c.DeleteSandbox(cmd.Context(), id)
				switch {
				case err == nil:
					if _, err := fmt.Fprintln(a.stdout, id); err != nil {
						return err
					}
				case isConnectError(err) || cmd.Context().Err() != nil:
					return err // the rest would fail the same way
				default:
					a.printError(err)
					failed = true
				}
			}
			if failed {
				return exitCode(exitError)
			}
			return nil
		},
	}
}
