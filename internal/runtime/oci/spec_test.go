package oci

import (
	"slices"
	"testing"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// TestSpecOneProcessor checks that the agent starts with GOMAXPROCS=1 and
// the variable telling it that the value is its own, unless the sandbox's
// environment sets GOMAXPROCS, which then reaches the agent alone.
func TestSpecOneProcessor(t *testing.T) {
	mark := agentv1.OneProcessor + "=1"
	for _, tt := range []struct {
		name       string
		env        []string
		want, none []string
	}{
		{name: "unset by the sandbox", env: []string{"FOO=bar"}, want: []string{"FOO=bar", "GOMAXPROCS=1", mark}},
		{name: "set by the sandbox", env: []string{"GOMAXPROCS=3"}, want: []string{"GOMAXPROCS=3"}, none: []string{"GOMAXPROCS=1", mark}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := specFor(backend.Spec{ID: "s1", Env: tt.env}, Config{}, "", nil).Process.Env
			for _, kv := range tt.want {
				if !slices.Contains(env, kv) {
					t.Errorf("the agent's environment %q lacks %s", env, kv)
				}
			}
			for _, kv := range tt.none {
				if slices.Contains(env, kv) {
					t.Errorf("the agent's environment %q has %s", env, kv)
				}
			}
		})
	}
}
