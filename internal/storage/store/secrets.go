package store

import (
	"context"
	"time"
)

// How a secret reaches a sandbox (Secret.Inject).
const (
	// InjectEnv: the sandbox's commands get the value in an environment
	// variable named after the secret.
	InjectEnv = "env"
	// InjectProxy: the variable holds the secret's placeholder, which the
	// daemon's egress proxy swaps for the value only on connections to the
	// secret's hosts; the value never enters the sandbox.
	InjectProxy = "proxy"
)

// Secret is a secret's stored record: its value only sealed, under the
// vault's master key (see internal/trust/secrets). Workspace, User and Name are
// its key.
type Secret struct {
	// Workspace is the tenant it belongs to.
	Workspace string
	// User is the user of Workspace whose personal secret it is; "" for a
	// secret of the whole workspace.
	User string
	// Name is the environment variable it becomes.
	Name        string
	Description string
	// Inject is InjectEnv or InjectProxy.
	Inject string
	// Hosts are the hosts a proxy secret is for (InjectProxy only).
	Hosts []string
	// Query: the proxy swaps the placeholder in URLs' query strings too,
	// not only in headers (InjectProxy only).
	Query bool
	// Placeholder stands for the value in a proxy secret's variable
	// (InjectProxy only). Made when the secret is first set, and kept when
	// its value changes, so that a running sandbox's placeholder stays
	// good.
	Placeholder string
	// Sealed is the value sealed under the master key: nonce, then
	// ciphertext. Never log it.
	Sealed    []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Secrets is where the vault (internal/trust/secrets) keeps secrets.
// Errors wrap errdefs.ErrNotFound where said.
type Secrets interface {
	// PutSecret inserts s, or updates the secret of its workspace, user
	// and name, keeping its CreatedAt, and its Placeholder unless s gives
	// one; it sets s's CreatedAt and Placeholder to what is stored.
	PutSecret(ctx context.Context, s *Secret) error
	// GetSecret returns one secret; ErrNotFound if there is none.
	GetSecret(ctx context.Context, workspace, user, name string) (*Secret, error)
	// ListSecrets returns a workspace's secrets of every scope ("" for
	// every workspace's), by workspace, user and name.
	ListSecrets(ctx context.Context, workspace string) ([]*Secret, error)
	// DeleteSecret removes one secret; ErrNotFound if there is none.
	DeleteSecret(ctx context.Context, workspace, user, name string) error
	// VaultCheck returns the key check, nil when none was set.
	VaultCheck(ctx context.Context) ([]byte, error)
	// SetVaultCheck sets the key check.
	SetVaultCheck(ctx context.Context, check []byte) error
	// ResealAll replaces every stored secret's Sealed, and the key check,
	// in one transaction; ErrConflict, and nothing changed, unless secrets
	// are exactly those stored, each as last updated.
	ResealAll(ctx context.Context, secrets []*Secret, check []byte) error
}
