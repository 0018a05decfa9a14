package agent

import (
	"os/exec"
	"strings"
	"testing"
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
