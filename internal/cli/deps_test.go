package cli

import (
	"testing"

	"github.com/hutchdev/hutch/internal/deptest"
)

// The CLI's commands reach the daemon through the public client only; the
// daemon (hutch serve) and the agent (hutch agent) are roles of the binary
// it starts, not packages it reaches into.
func TestDependencies(t *testing.T) {
	t.Parallel()
	deptest.Check(t, deptest.Rule{Package: ".", Direct: true, Bad: map[string]string{
		"github.com/hutchdev/hutch/internal/store/...":   "the CLI never opens the store: it asks the daemon",
		"github.com/hutchdev/hutch/internal/sandbox/...": "the CLI asks the daemon, through client/",
		"github.com/hutchdev/hutch/internal/backend/...": "the CLI asks the daemon, through client/",
		"github.com/hutchdev/hutch/internal/api/...":     "the CLI asks the daemon, through client/",
	}})
}
