package sandbox

import (
	"testing"

	"github.com/hutchdev/hutch/internal/deptest"
)

// The core reaches the agent only through its typed client, which speaks
// Hutch's types: the agent's protobuf messages stay behind it. The
// services beside the core (exec and processes, files, tools, templates,
// volumes) stand on it, not it on them, and it knows nothing of HTTP.
func TestDependencies(t *testing.T) {
	t.Parallel()
	const services = "services stand on the core (Acquire, Running), not the core on them"
	deptest.Check(t, deptest.Rule{Package: ".", Direct: true, Bad: map[string]string{
		"github.com/hutchdev/hutch/internal/agent/agentpb/...": "the agent is reached through internal/agent/agentclient, whose methods take and return Hutch's types",
		"github.com/hutchdev/hutch/internal/agent":             "the agent runs inside sandboxes; the core talks to it through its client",
		"connectrpc.com/connect":                               "the agent's protocol is the agent client's business",
		"github.com/hutchdev/hutch/internal/exec":              services,
		"github.com/hutchdev/hutch/internal/files":             services,
		"github.com/hutchdev/hutch/internal/toolrun":           services,
		"github.com/hutchdev/hutch/internal/templates":         services,
		"github.com/hutchdev/hutch/internal/volume":            services,
		"github.com/hutchdev/hutch/internal/api/...":           "the API stands on the core",
		"net/http": "the core speaks no HTTP: the API does",
	}})
}
