package agent

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/deptest"
)

// The agent runs inside every sandbox: it must stay small and must not pull
// in daemon-side code (like Tailscale's deptest).
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not installed")
	}
	out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps", "github.com/hutchdev/hutch/internal/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/hutchdev/hutch/internal/store",
		"github.com/hutchdev/hutch/internal/backend",
		"github.com/hutchdev/hutch/internal/sandbox",
		"github.com/hutchdev/hutch/internal/api",
		"github.com/hutchdev/hutch/internal/daemon",
		"github.com/hutchdev/hutch/internal/errdefs",
		"github.com/hutchdev/hutch/internal/agent/agentclient",
		"modernc.org/sqlite",
		"k8s.io",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, f+"/") {
				t.Errorf("internal/agent depends on %s", pkg)
			}
		}
	}
}

// The agent's protobuf messages are its own and its client's: everything
// else speaks Hutch's types, through the agent client (an E2B front will
// proxy envd's services as bytes, not decode them).
// Not parallel: go list is a child of the test process, which the
// in-process agents of parallel tests reap as their own.
func TestProtobufStaysInside(t *testing.T) {
	deptest.CheckConfined(t, deptest.Confinement{
		Tree:      "github.com/hutchdev/hutch/internal/agent/agentpb/...",
		Importers: []string{"github.com/hutchdev/hutch/internal/agent/..."},
		Why:       "only the agent and its client (internal/agent/agentclient) see the agent's protobuf types",
	})
}
