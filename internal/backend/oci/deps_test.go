package oci

import (
	"testing"

	"github.com/hutchdev/hutch/internal/deptest"
)

// A runtime creates, stops, pauses, checkpoints and destroys sandboxes and
// hands out connections to their agents; what goes over those connections
// is the agent client's business. What the runtime tells the agent outside
// them (the listener signals) is in api/agent/v1, which imports nothing.
func TestDependencies(t *testing.T) {
	t.Parallel()
	deptest.Check(t, deptest.Rule{Package: ".", Bad: map[string]string{
		"github.com/hutchdev/hutch/internal/agent/...": "a runtime knows nothing of the agent's code: exec and files go through the agent client",
		"github.com/hutchdev/hutch/internal/store/...": "a runtime knows nothing of the store: the core persists its handles",
		"net/http": "a runtime speaks no HTTP: it dials the agent, the agent client speaks to it",
	}})
}
