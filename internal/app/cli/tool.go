package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hutchdev/hutch/client"
	"github.com/spf13/cobra"
)

func (a *app) newToolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tool",
		Aliases: []string{"tools"},
		Short:   "List and call the sandbox tools offered to LLM agents",
		Long: "The tools an agent's model calls (read, write, edit, patch files, run\n" +
			"commands), as GET /v1/tools and MCP offer them.",
	}
	groupCmd(cmd)
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the tools, with what each does",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			list, err := c.ListTools(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(list)
			}
			t := newTable(a.stdout, "NAME", "WHAT IT DOES")
			for _, tool := range list {
				first, _, _ := strings.Cut(tool.Description, ". ")
				t.row(tool.Name, strings.TrimSuffix(first, ".")+".")
			}
			return t.flush()
		},
	}
	var mode string
	run := &cobra.Command{
		Use:   "run ID NAME [ARGS_JSON | -]",
		Short: "Call a tool in a sandbox and print its result",
		Long: "Call tool NAME in sandbox ID with its arguments, a JSON object (- reads\n" +
			"it from stdin), and print the result as JSON. A tool that fails prints\n" +
			"its error's kind and message, and hutch exits with 1.",
		Example: `  hutch tool run abc123 sandbox_read_file '{"path": "main.py"}'` + "\n" +
			`  git diff | jq -Rs '{patch: .}' | hutch tool run abc123 sandbox_apply_patch -`,
		Args: rangeArgs(2, 3, "a sandbox ID, a tool name and its arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := "{}"
			if len(args) == 3 {
				raw = args[2]
			}
			if raw == "-" {
				b, err := io.ReadAll(a.stdin)
				if err != nil {
					return err
				}
				raw = string(b)
			}
			if !json.Valid([]byte(raw)) {
				return usageErrorf(cmd, "the arguments must be a JSON object, got %q", raw)
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			var opts []client.ToolOption
			if mode != "" {
				opts = append(opts, client.InMode(mode))
			}
			res, err := c.RunTool(cmd.Context(), args[0], args[1], json.RawMessage(raw), opts...)
			if err != nil {
				return err
			}
			if a.jsonOutput() || res.Error == nil {
				if err := a.printJSON(res); err != nil {
					return err
				}
			}
			if res.Error != nil {
				if !a.jsonOutput() {
					a.printf("hutch: %s: %s\n", res.Error.Kind, res.Error.Message)
					if len(res.Result) > 0 {
						_, _ = fmt.Fprintf(a.stdout, "%s\n", res.Result)
					}
				}
				return exitCode(exitError)
			}
			return nil
		},
	}
	run.Flags().StringVar(&mode, "mode", "", "sandbox mode: all (every call in the sandbox), selective (risky calls in it, the rest on the host) or off (all on the host), as the daemon allows (default: the daemon's)")
	cmd.AddCommand(ls, run)
	return cmd
}
