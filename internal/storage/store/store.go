// Package store keeps the daemon's state. The Store interface is what the rest
// of the daemon uses; store/sqlite implements it.
package store

import (
	"context"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"time"
)

// Store persists sandboxes. Methods are safe for concurrent use.
// Errors wrap errdefs.ErrNotFound or errdefs.ErrAlreadyExists where said.
type Store interface {
	// CreateSandbox inserts sb; ErrAlreadyExists if its ID is taken.
	CreateSandbox(ctx context.Context, sb *Sandbox) error
	// GetSandbox returns one sandbox; ErrNotFound if there is none.
	GetSandbox(ctx context.Context, id string) (*Sandbox, error)
	// ListSandboxes returns all sandboxes, oldest first.
	ListSandboxes(ctx context.Context) ([]*Sandbox, error)
	// ChangeState applies a change of a sandbox's state if its stored
	// state is one of c.From: ErrNotFound if it is absent, ErrConflict
	// (saying what it is) if its state is another. Nothing else of the
	// record changes but what c names, except that a sandbox going to
	// deleting gives up its key: a get-or-create with that key after a
	// delete makes a new sandbox while the old one is torn down.
	ChangeState(ctx context.Context, c StateChange) error
	// SetTimers sets a sandbox's idle timeout, idle action and end of
	// life, and nothing else; ErrNotFound if absent.
	SetTimers(ctx context.Context, id string, t Timers) error
	// Reshape sets what a sandbox is made with: its env, metadata and
	// limits, and nothing else; ErrNotFound if absent.
	Reshape(ctx context.Context, id string, s Shape) error
	// SetNetwork sets a sandbox's network policy, and nothing else;
	// ErrNotFound if absent.
	SetNetwork(ctx context.Context, id string, p netpolicy.Policy, at time.Time) error
	// GetSandboxByKey returns workspace ws's sandbox with key;
	// ErrNotFound if none.
	GetSandboxByKey(ctx context.Context, ws, key string) (*Sandbox, error)
	// DeleteSandbox removes a sandbox; ErrNotFound if absent.
	DeleteSandbox(ctx context.Context, id string) error

	// PutProcess inserts or replaces a background process of a sandbox;
	// ErrNotFound if the sandbox is absent.
	PutProcess(ctx context.Context, p *Process) error
	// ListProcesses returns a sandbox's background processes, oldest first.
	ListProcesses(ctx context.Context, sandboxID string) ([]*Process, error)
	// DeleteProcess removes one; ErrNotFound if absent. Deleting a sandbox
	// deletes its processes.
	DeleteProcess(ctx context.Context, sandboxID, name string) error
	// SetLinksRevoked sets a process's LinksRevokedAt to at, unless it is
	// later already, and nothing else; ErrNotFound if absent.
	SetLinksRevoked(ctx context.Context, sandboxID, name string, at time.Time) error

	// CreateVolume records a volume; ErrAlreadyExists if the name is taken.
	CreateVolume(ctx context.Context, v *Volume) error
	// ListVolumes returns every volume, by name.
	ListVolumes(ctx context.Context) ([]*Volume, error)
	// DeleteVolume removes a volume's record; ErrNotFound if absent.
	DeleteVolume(ctx context.Context, name string) error

	// CreateAPIKey records a key; ErrAlreadyExists if the name is taken.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// ListAPIKeys returns every key, by name.
	ListAPIKeys(ctx context.Context) ([]*APIKey, error)
	// APIKeyByHash finds a key by its hash; ErrNotFound if none.
	APIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// DeleteAPIKey removes a key; ErrNotFound if absent.
	DeleteAPIKey(ctx context.Context, name string) error

	Workspaces
	Audit
	Nodes
	Events
	Close() error
}

// APIKey is an API key besides the daemon's own. The key itself is not
// kept, only its hash.
type APIKey struct {
	Name string
	Hash string
	// ToolsMode is the least isolated sandbox mode its tool calls may use
	// (and the one they get when they name none).
	ToolsMode string
	// NetworkMode is the least isolated network mode its sandboxes may
	// ask for (and the most they get when they name none).
	NetworkMode string
	// Workspace is the workspace it acts in and its objects belong to.
	Workspace string
	CreatedAt time.Time
}

// Volume is a named persistent volume: a directory that outlives the
// sandboxes that mount it.
type Volume struct {
	Name      string
	CreatedAt time.Time
}

// VolumeMount is a volume a sandbox sees at Path, read-only or writable
// (Access "ro" or "rw").
type VolumeMount struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Access string `json:"access"`
}

// What the idle timer does to a sandbox.
const (
	IdleSuspend = "suspend"
	IdleStop    = "stop"
	IdleDelete  = "delete"
)

// StateChange is one change of a sandbox's state (see Store.ChangeState).
type StateChange struct {
	ID     string
	From   []State
	To     State
	Reason string
	At     time.Time
	// Handle, when not nil, is the backend's new handle state.
	Handle []byte
}

// Timers are what Store.SetTimers sets.
type Timers struct {
	IdleTimeout time.Duration
	IdleAction  string
	ExpiresAt   time.Time
	At          time.Time // the record's UpdatedAt
}

// Shape is what Store.Reshape sets.
type Shape struct {
	Env, Metadata map[string]string
	CPUs          float64
	MemoryMB      int64
	Pids          int64
	DiskMB        int64
	Volumes       []VolumeMount
	At            time.Time // the record's UpdatedAt
}

// Sandbox is a sandbox's stored record.
type Sandbox struct {
	ID string
	// Workspace owns it: only its keys (and the administrator) find it.
	Workspace string
	// User is who in its workspace it was made for (the product's own
	// user id; "" when none was named): whose personal secrets it gets.
	User     string
	Template string
	// TemplateVersion is the version of Template the sandbox was made from.
	TemplateVersion string
	Backend         string
	State           State
	StateReason     string
	// Handle is the backend's opaque state for Recover.
	Handle []byte

	CPUs        float64
	MemoryMB    int64
	Pids        int64
	DiskMB      int64
	IdleTimeout time.Duration
	// IdleAction is what the idle timer does: IdleSuspend, IdleStop or
	// IdleDelete.
	IdleAction string
	// Key, when not empty, is what get-or-create finds it by; unique.
	Key string
	// ExpiresAt is the end of its max lifetime: it is deleted then.
	ExpiresAt time.Time
	// Volumes are the volumes it mounts.
	Volumes []VolumeMount
	// Network is its network policy (mode none if empty).
	Network netpolicy.Policy
	// Env holds values that may be secret: never log or return them.
	Env      map[string]string
	Metadata map[string]string
	// Secrets, when not nil, narrows the workspace's secrets its commands
	// get to these names.
	Secrets []string
	// Node is the node daemon that holds it ("" on a single box).
	Node string
	// Image names the image of it, suspended, that its node uploaded to
	// the shared image store ("": none): another node can resume it.
	Image string
	// Checkpoints is when its checkpoints are taken: "" on request,
	// CheckpointsPerToolCall before each tool call that changes
	// something too.
	Checkpoints string
	// OnSuspend and OnResume are commands (sh -c) run in it as its user
	// before it is suspended or stopped, and once it runs again: "" for
	// none.
	OnSuspend, OnResume string

	CreatedAt time.Time
	UpdatedAt time.Time
}

// CheckpointsPerToolCall: a checkpoint before each tool call that changes
// something (Sandbox.Checkpoints).
const CheckpointsPerToolCall = "per_tool_call"

// Process is a background process started through the API (a service, with
// Port): a resume starts it again, with the same command and env, if it was
// Running when its sandbox was suspended.
type Process struct {
	SandboxID string
	Name      string
	Argv      []string
	Cwd       string
	User      string
	// Env holds values that may be secret: never log or return them.
	Env  map[string]string
	Port int
	// ForUser is the product's user it runs for: whose personal secrets
	// it gets at each start ("": its sandbox's user).
	ForUser string
	// Stdin keeps its stdin open for input, at each start.
	Stdin bool
	// A process with a Port is a service. Public: its preview answers
	// without a key or a link. Slot: the pane it fills ("": none).
	Public bool
	Slot   string
	// Running says whether it ran when last seen by a suspend or a start.
	Running   bool
	CreatedAt time.Time
	// LinksRevokedAt: a service's preview links made until then open
	// nothing (zero: none revoked). SetLinksRevoked sets it; PutProcess
	// never moves it back, so that neither a write from an older read nor
	// a new process of the same name revives a revoked link.
	LinksRevokedAt time.Time
}
