package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "key",
		Aliases: []string{"keys"},
		Short:   "Make, list and remove API keys for the apps that call Hutch",
		Long: "API keys besides the daemon's own (api.key), one per app, each acting in one\n" +
			"workspace (a tenant: it sees only its workspace's sandboxes, volumes,\n" +
			"templates and secrets) with the least isolated sandbox mode its tool calls\n" +
			"may use. The daemon's own key manages every workspace's keys; a key, those\n" +
			"of its own workspace, with no more rights than its own.",
	}
	groupCmd(cmd)
	var mode, network, ws string
	create := &cobra.Command{
		Use:   "create NAME [--workspace W] [--tools-mode all|selective|off] [--network none|allowlist|full]",
		Short: "Make a key and print it (it is shown this once)",
		Args:  exactArgs(1, "a key name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			k, err := c.CreateAPIKeyWith(cmd.Context(), client.CreateAPIKeyRequest{Name: args[0], Workspace: ws, ToolsMode: mode, NetworkMode: network})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(k)
			}
			_, err = fmt.Fprintln(a.stdout, k.Key)
			return err
		},
	}
	create.Flags().StringVar(&ws, "workspace", "", "the workspace it acts in, made on first use (default: the caller's; for the daemon's own key, a new one named after the key; never default, the daemon's own)")
	create.Flags().StringVar(&network, "network", "", "the least isolated network mode its sandboxes may ask for, and the most they get when they name none: none, allowlist or full (the default)")
	create.Flags().StringVar(&mode, "tools-mode", "", "the least isolated sandbox mode its tool calls may use, and theirs when they name none: all (the default: every call in the sandbox), selective or off")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the keys (not their secrets)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			keys, err := c.ListAPIKeys(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(keys)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "WORKSPACE", "TOOLS MODE", "NETWORK", "CREATED")
			for _, k := range keys {
				t.row(k.Name, k.Workspace, k.ToolsMode, k.NetworkMode, age(now, k.CreatedAt))
			}
			return t.flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove keys: they work no more",
		Args:  minArgs(1, "one or more key names"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, args, c.DeleteAPIKey)
		},
	}
	cmd.AddCommand(create, ls, rm)
	return cmd
}
