// Package storetest is the conformance suite of store.Store: every
// implementation (store/sqlite, store/postgres) runs it from its tests, so
// that the daemon cannot tell them apart. What is one implementation's own
// (SQLite's file and its permissions, say) stays in its package.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/storage/store"
)

// Store is what an implementation gives the daemon: the Store, and the
// secrets' methods the vault keeps its secrets with.
type Store interface {
	store.Store
	store.Secrets
}

// Harness is what the suite needs of an implementation.
type Harness struct {
	// Open returns a new, empty store (migrated, with only what its
	// migrations put there), closed by t.Cleanup. Tests run in parallel,
	// each with its own.
	Open func(t *testing.T) Store
	// Exec runs one SQL statement on s's database, beneath the interface:
	// the suite checks what the schema itself refuses (a change of the
	// audit log).
	Exec func(ctx context.Context, s Store, stmt string) error
}

// Run runs every test of the suite, as subtests of t.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"ChangeStateRace", testChangeStateRace},
		{"SandboxErrors", testSandboxErrors},
		{"ListSandboxes", testListSandboxes},
		{"SandboxKeys", testSandboxKeys},
		{"SandboxKeyRace", testSandboxKeyRace},
		{"Processes", testProcesses},
		{"Volumes", testVolumes},
		{"APIKeys", testAPIKeys},
		{"Workspaces", testWorkspaces},
		{"WorkspacesConcurrently", testWorkspacesConcurrently},
		{"Audit", testAudit},
		{"SecretRoundTrip", testSecretRoundTrip},
		{"VaultCheck", testVaultCheck},
		{"ResealAll", testResealAll},
		{"Nodes", testNodes},
		{"NodeLostRace", testNodeLostRace},
		{"ClusterTemplates", testClusterTemplates},
		{"MoveSandbox", testMoveSandbox},
		{"Events", testEvents},
		{"Webhooks", testWebhooks},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// Sample is a sandbox's record with every field set.
func Sample(id string) *store.Sandbox {
	now := now()
	return &store.Sandbox{
		ID: id, Template: "host", TemplateVersion: "20261122T070000123Z", Backend: "runc", State: store.Running,
		Handle: []byte(`{"dir":"/x"}`), CPUs: 1.5, MemoryMB: 512, Pids: 256,
		IdleTimeout: 300 * time.Second, Env: map[string]string{"A": "b"},
		Metadata: map[string]string{"owner": "t"}, CreatedAt: now, UpdatedAt: now, IdleAction: store.IdleSuspend,
		ExpiresAt: now.Add(time.Hour), Workspace: "default", User: "u-42", Secrets: []string{"TOKEN"},
		Node: "node-a", Image: "", Checkpoints: store.CheckpointsPerToolCall,
		OnSuspend: "pg_ctl stop", OnResume: "pg_ctl start",
	}
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
