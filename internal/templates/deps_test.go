package templates

import (
	"testing"

	"github.com/hutchdev/hutch/internal/deptest"
)

// Build steps reach their sandbox's agent through its typed client, as the
// core does: the agent's protobuf messages stay behind it.
func TestAgentDependencies(t *testing.T) {
	t.Parallel()
	deptest.Check(t, deptest.Rule{Package: ".", Direct: true, Bad: map[string]string{
		"github.com/hutchdev/hutch/internal/agent/agentpb/...": "the agent is reached through internal/agent/agentclient, whose methods take and return Hutch's types",
		"github.com/hutchdev/hutch/internal/agent":             "the agent runs inside sandboxes; the daemon talks to it through its client",
		"connectrpc.com/connect":                               "the agent's protocol is the agent client's business",
	}})
}
