package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newE2BCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "e2b",
		Short: "Use E2B's SDKs with this daemon",
	}
	groupCmd(cmd)
	cmd.AddCommand(a.newE2BEnvCmd())
	return cmd
}

func (a *app) newE2BEnvCmd() *cobra.Command {
	var name, ws string
	cmd := &cobra.Command{
		Use:   "env [--key NAME [--workspace WS]]",
		Short: "Print the environment E2B's SDKs need to use this daemon, as export lines",
		Long: "Prints E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL and E2B_DOMAIN: with them, an\n" +
			"unmodified script written for E2B's SDKs runs its sandboxes here. The key is\n" +
			"this CLI's own, in E2B's shape (e2b_<hex>), or with --key a new key of that name.",
		Example: "  eval \"$(hutch e2b env)\" && node agent.mjs\n" +
			"  hutch e2b env --key app-e2b --workspace acme > e2b.env",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			info, err := c.E2BInfo(cmd.Context())
			if err != nil {
				return err
			}
			if info.SandboxURL == "" {
				return fmt.Errorf("the daemon serves no E2B sandbox front (it was started with --e2b-listen \"\"): start it without that flag, or with --e2b-listen ADDR")
			}
			key := c.APIKey()
			if name != "" {
				k, err := c.CreateAPIKeyWith(cmd.Context(), client.CreateAPIKeyRequest{Name: name, Workspace: ws})
				if err != nil {
					return err
				}
				key = k.Key
			}
			e2bKey, ok := strings.CutPrefix(key, "hutch_")
			if !ok {
				return fmt.Errorf("this CLI has no API key to give E2B's SDKs (HUTCH_API_KEY, or run as root beside the daemon): use --key NAME to make one")
			}
			for _, kv := range [][2]string{
				{"E2B_API_KEY", "e2b_" + e2bKey}, {"E2B_API_URL", info.APIURL},
				{"E2B_SANDBOX_URL", info.SandboxURL}, {"E2B_DOMAIN", info.Domain},
			} {
				if _, err := fmt.Fprintf(a.stdout, "export %s=%s\n", kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "key", "", "make a new API key of this name for E2B's SDKs")
	cmd.Flags().StringVar(&ws, "workspace", "", "the new key's workspace (default: the caller's)")
	return cmd
}
