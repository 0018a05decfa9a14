package cli

import (
	"context"
	"io"

	"github.com/hutchdev/hutch/internal/agent"
)

// agentMain is `hutch agent`: the agent's command line (agent.Main), for a
// hutch built without the agent's own binary embedded (go build rather than
// make build), whose daemon then runs itself as every sandbox's agent. It
// is not for people, so it is not in the command tree and its help, and it
// is parsed before the tree is built: building the tree cost the agent's
// start 0.7 ms.
func agentMain(ctx context.Context, args []string, stderr io.Writer) int {
	return agent.Main(ctx, args, stderr)
}
