package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// maxSecretInput bounds what `secret set` reads from standard input: a
// value is at most 64 KiB.
const maxSecretInput = 64<<10 + 1

func (a *app) newSecretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Set, list and remove the secrets sandboxes' commands get",
		Long: "Secrets of the key's workspace, or personal ones of a user of it (--user): each\n" +
			"command of the workspace's sandboxes gets them as environment variables, a\n" +
			"user's own over the workspace's. They are encrypted at rest, never shown\n" +
			"again, and redacted from output and logs. With --inject proxy and --host, the\n" +
			"variable holds a placeholder that the daemon swaps for the value only in\n" +
			"requests to those hosts: the value never enters the sandbox.",
	}
	groupCmd(cmd)
	var user, description, inject string
	var hosts []string
	var query bool
	set := &cobra.Command{
		Use:   "set NAME [--user U] [--description TEXT] [--inject env|proxy --host H...] < VALUE",
		Short: "Set a secret; its value is read from standard input, never from the command line",
		Args:  exactArgs(1, "a secret name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := io.ReadAll(io.LimitReader(a.stdin, maxSecretInput))
			if err != nil {
				return fmt.Errorf("read the value from standard input: %w", err)
			}
			// A value typed or piped with echo ends with a newline that
			// is not part of it.
			value = bytes.TrimSuffix(bytes.TrimSuffix(value, []byte("\n")), []byte("\r"))
			if len(value) == 0 {
				return usageErrorf(cmd, "the value is read from standard input, which was empty: printf %%s \"$VALUE\" | hutch secret set %s", args[0])
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			req := client.SetSecretRequest{Name: args[0], Value: string(value), Description: description, Inject: inject, Hosts: hosts, Query: query}
			if user != "" {
				req.Scope, req.User = client.ScopeUser, user
			}
			s, err := c.SetSecret(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			_, err = fmt.Fprintln(a.stdout, s.Name)
			return err
		},
	}
	set.Flags().StringVar(&user, "user", "", "a personal secret of this user of the workspace (default: the workspace's)")
	set.Flags().StringVar(&description, "description", "", "what it is for")
	set.Flags().StringVar(&inject, "inject", "", "env (the default: the value in the variable) or proxy (a placeholder, swapped for the value by the daemon in requests to --host)")
	set.Flags().StringSliceVar(&hosts, "host", nil, "a host a proxy secret is for: api.example.com, *.example.com, optionally :port; repeatable")
	set.Flags().BoolVar(&query, "query", false, "a proxy secret is swapped in URLs' query strings too, not only in headers")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the secrets (never their values)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			list, err := c.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(list)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "WORKSPACE", "SCOPE", "INJECT", "UPDATED", "DESCRIPTION")
			for _, s := range list {
				scope := s.Scope
				if s.User != "" {
					scope += ":" + s.User
				}
				inject := s.Inject
				if len(s.Hosts) > 0 {
					inject += " (" + strings.Join(s.Hosts, ",") + ")"
				}
				t.row(s.Name, s.Workspace, scope, inject, age(now, s.UpdatedAt), s.Description)
			}
			return t.flush()
		},
	}
	var rmUser string
	rm := &cobra.Command{
		Use:   "rm NAME... [--user U]",
		Short: "Remove secrets: commands started from now on get them no more",
		Args:  minArgs(1, "one or more secret names"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, args, func(ctx context.Context, name string) error {
				return c.DeleteSecret(ctx, name, rmUser)
			})
		},
	}
	rm.Flags().StringVar(&rmUser, "user", "", "remove this user's personal secret (default: the workspace's)")
	rotate := &cobra.Command{
		Use:   "rotate-master",
		Short: "Re-encrypt every secret under a new master key (the daemon's own key only)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.RotateMaster(cmd.Context())
		},
	}
	cmd.AddCommand(set, ls, rm, rotate)
	return cmd
}
