package cli

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/internal/front/mcpserver"
)

func (a *app) newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Hutch's sandbox tools to an MCP client on stdin and stdout",
		Long: "Serve the sandbox tools (hutch tool ls), sandbox_create and sandbox_list\n" +
			"over the Model Context Protocol on stdin and stdout, acting through the\n" +
			"daemon at $HUTCH_URL with $HUTCH_API_KEY. An MCP client starts it, as in\n" +
			"Claude Desktop's or Cursor's config: {\"command\": \"hutch\", \"args\": [\"mcp\"]}.\n" +
			"The daemon also serves the same tools at /mcp (streamable HTTP).",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			srv, err := mcpserver.New(c, Version)
			if err != nil {
				return err
			}
			return srv.Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
}
