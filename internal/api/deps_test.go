package api

import (
	"testing"

	"github.com/hutchdev/hutch/internal/deptest"
)

// The API speaks the core's domain types and the wire types of client/,
// not the store's records nor the agent's messages.
func TestDependencies(t *testing.T) {
	t.Parallel()
	deptest.Check(t, deptest.Rule{Package: ".", Direct: true, Bad: map[string]string{
		"github.com/hutchdev/hutch/internal/store/...":   "records are the store's: the API answers with domain and wire types",
		"github.com/hutchdev/hutch/internal/backend/...": "runtimes are the core's business",
		"github.com/hutchdev/hutch/internal/agent/...":   "the agent's protocol and types are the core's business: the API answers with the core's types",
	}})
}
