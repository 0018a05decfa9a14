package store

import "time"

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
// vault's master key (see internal/secrets). Workspace, User and Name are
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
