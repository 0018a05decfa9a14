package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/internal/agent"
)

// newAgentCmd is `hutch agent`: the daemon starts it as PID 1 of every
// sandbox. Not for people, hence hidden.
func newAgentCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run the in-sandbox agent (started by the daemon inside each sandbox)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return usageErrorf(cmd, "--socket is required")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			return agent.Run(cmd.Context(), agent.Config{Socket: socket, Logger: log})
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket to serve on")
	cmd.AddCommand(&cobra.Command{
		Use:                "shim",
		Short:              "Supervise the agent's commands (started by the agent, ahead of use)",
		Hidden:             true,
		DisableFlagParsing: true, // its arguments are the shim's own
		RunE: func(_ *cobra.Command, args []string) error {
			if code := agent.Shim(args); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	})
	return cmd
}
