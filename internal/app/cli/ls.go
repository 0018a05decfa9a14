package cli

import (
	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			sbs, err := c.ListSandboxes(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if sbs == nil {
					sbs = []client.Sandbox{}
				}
				return a.printJSON(sbs)
			}
			// The daemon's own key lists every workspace's: then each
			// row says whose.
			spaces := map[string]bool{}
			for _, sb := range sbs {
				spaces[sb.Workspace] = true
			}
			now := a.now()
			if len(spaces) > 1 {
				t := newTable(a.stdout, "ID", "WORKSPACE", "TEMPLATE", "RUNTIME", "STATE", "AGE")
				for _, sb := range sbs {
					t.row(sb.ID, sb.Workspace, sb.Template, sb.Runtime, sb.State, age(now, sb.CreatedAt))
				}
				return t.flush()
			}
			t := newTable(a.stdout, "ID", "TEMPLATE", "RUNTIME", "STATE", "AGE")
			for _, sb := range sbs {
				t.row(sb.ID, sb.Template, sb.Runtime, sb.State, age(now, sb.CreatedAt))
			}
			return t.flush()
		},
	}
}
