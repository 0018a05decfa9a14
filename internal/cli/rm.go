package cli

import (
	"context"
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
			return a.removeEach(cmd, args, c.DeleteSandbox)
		},
	}
}

// removeEach removes each of names with del, printing each name once
// removed. A failure is reported and makes the exit code 1; the others are
// still removed, unless the daemon cannot be reached at all.
func (a *app) removeEach(cmd *cobra.Command, names []string, del func(context.Context, string) error) error {
	failed := false
	for _, name := range names {
		err := del(cmd.Context(), name)
		switch {
		case err == nil:
			if _, err := fmt.Fprintln(a.stdout, name); err != nil {
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
}
