package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) newHealthCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the daemon's health: runtimes, warm pools, template builds under way",
		Long: "Show what GET /v1/health answers: the daemon's version, each runtime and\n" +
			"whether it is usable (why not, or how far it is being set up), the default runtime, the warm pools\n" +
			"and how many of their sandboxes are ready, and the template builds under\n" +
			"way with how far they are. -o json prints the whole answer.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			h, err := c.Health(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(h)
			}
			out := a.stdout
			_, _ = fmt.Fprintf(out, "hutch %s: %s; default runtime %s (%s)\n", h.Version, h.Status, h.DefaultRuntime, h.DefaultReason)
			for _, b := range h.Backends {
				state := "usable"
				switch {
				case b.Pending:
					state = "being set up: " + b.Reason
				case !b.Usable:
					state = "not usable: " + b.Reason
				}
				name := b.Name
				if b.Version != "" {
					name += " " + b.Version
				}
				_, _ = fmt.Fprintf(out, "runtime %s: %s\n", name, state)
			}
			for _, p := range h.Pools {
				_, _ = fmt.Fprintf(out, "pool %s on %s: %d of %d ready\n", p.Template, orDash(p.Runtime), p.Ready, p.Size)
			}
			for _, b := range h.Builds {
				_, _ = fmt.Fprintf(out, "building %s: %s\n", b.Template, b.Description)
			}
			return nil
		},
	}
}
