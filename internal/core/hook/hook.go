// Package hook is what the lifecycle kernel (internal/core) and the
// features attached to its steps agree on: the steps, as interfaces a
// hook implements, and what each step hands it (HashiCorp Nomad's
// allocrunner hooks are the model). A hook implements the interfaces of
// the steps it attaches to; core.Config.Hooks lists them, and each step
// runs its hooks in that order (List). Adding a capability adds a hook,
// not methods on the kernel. The hooks import this package, not the
// kernel: the kernel's own tests wire them as the daemon does.
package hook

import (
	"context"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// A Hook is a feature attached to the kernel. Name names it in logs.
type Hook interface {
	Name() string
}

// Admission is a sandbox about to hold resources: a create (with its
// disk), or a resume or start of one whose files were kept (without); or,
// with Growth, a running sandbox whose limits grow by MemoryMB and CPUs.
type Admission struct {
	Workspace string
	MemoryMB  int64
	CPUs      float64
	DiskMB    int64
	// Growth: the sandbox counts already; only what it asks more is new.
	Growth bool
}

// An Admitter admits sandboxes before they start to hold resources.
// release is called once the sandbox counts (its record says it runs or
// resumes) or its start failed; an error refuses the start, and is the
// caller's answer.
type Admitter interface {
	Hook
	Admit(ctx context.Context, a Admission) (release func(), err error)
}

// A Ticker runs with the kernel's timers, at each tick (see
// core.Config's ReapInterval), at the kernel clock's time.
type Ticker interface {
	Hook
	Tick(ctx context.Context, now time.Time)
}

// A Preparer checks, and may fill in, a create's options before anything
// is made for it: that the secrets it names exist, its network policy
// (the default, the caller's ceiling). An error refuses the create.
type Preparer interface {
	Hook
	Prepare(ctx context.Context, o *create.Options) error
}

// Live is a sandbox whose container runs, as its hooks see it.
type Live struct {
	ID      string
	Backend backend.Backend
	Handle  backend.Handle
	// Agent is the client of its agent.
	Agent *agentclient.Client
	// Network is its network policy; a warm pool's sandbox, no one's yet,
	// has mode none until it is claimed.
	Network netpolicy.Policy
}

// A Starter attaches to a sandbox's container each time it starts: a
// create, a resume, a recovery after a restart, a warm pool's make. stop
// is called when the container stops (a suspend, a stop, a delete, its
// loss). An error fails a create; a resume or a recovery goes on without
// what failed, and says so in the log.
type Starter interface {
	Hook
	Start(ctx context.Context, l Live) (stop func(), err error)
}

// A Claimer learns that a warm pool's sandbox is a caller's now, with the
// caller's network policy.
type Claimer interface {
	Hook
	Claimed(ctx context.Context, l Live)
}

// A Deleter forgets a sandbox that is gone (deleted, or a warm pool's
// that no one took).
type Deleter interface {
	Hook
	Deleted(id string)
}

// Command is a command about to start in a sandbox, as hooks see it.
type Command struct {
	Sandbox string
	// Workspace owns the sandbox; "" for a warm pool's, no one's yet.
	Workspace string
	// User is the product's user the command runs for ("": none).
	User string
	// Secrets are the names the sandbox's secrets were narrowed to at
	// its create; nil: all of them.
	Secrets []string
}

// An Enver adds to a command's environment: env is the environment being
// built, the kernel's own copy of the sandbox's with what the Envers
// before it set, which it may change in place; the command's own env goes
// over the result. Never log what it sets.
type Enver interface {
	Hook
	CommandEnv(ctx context.Context, c Command, env map[string]string) error
}

// A Binder mounts host directories into a sandbox made with o: at its
// create, and again at each resume (o then from its record). A warm
// pool's sandbox, no one's yet, is made with the default options.
type Binder interface {
	Hook
	Binds(o *create.Options) []backend.Bind
}

// Sandbox is a running sandbox as a hook sees it (core.Running): held
// for a hook's call, or looked at (Kernel.Peek).
type Sandbox interface {
	ID() string
	// Agent is the client of its agent.
	Agent() *agentclient.Client
	// CommandEnv is the environment of a command run in it for forUser
	// ("": the sandbox's user) with env of its own. It may hold secrets:
	// never log it.
	CommandEnv(ctx context.Context, forUser string, env map[string]string) (map[string]string, error)
}

// A Busier tells what keeps a live sandbox busy besides the kernel's own
// calls, commands and CPU use (its background processes): the idle timer
// leaves it alone while there is something, and core.Activity says what.
// An error says it cannot tell: the sandbox is not kept awake for it.
type Busier interface {
	Hook
	Busy(ctx context.Context, sb Sandbox) (reasons []string, err error)
}

// A Suspender runs before a sandbox is suspended or stopped, its agent
// still answering (not when it is paused: a frozen agent answers
// nothing).
type Suspender interface {
	Hook
	Suspending(ctx context.Context, sb Sandbox)
}

// A Resumer runs once a suspended or stopped sandbox runs again, its
// agent answering, before any call reaches it.
type Resumer interface {
	Hook
	Resumed(ctx context.Context, sb Sandbox)
}

// Kernel is what the kernel lends the hooks that act on a sandbox outside
// its steps (an upload once it is suspended): given once, to an Attacher,
// when the kernel is made.
type Kernel interface {
	// Lock takes sandbox id's lock, which every change of its life
	// holds: while a hook holds it, the sandbox stays as it is.
	Lock(ctx context.Context, id string) (unlock func(), err error)
	// Go runs fn in the background; the kernel's Close waits for it.
	Go(fn func())
	// Peek is sandbox id if it runs here and is not paused, looked at
	// without holding it: it is not woken, the look is no activity, and
	// its agent may go at any moment.
	Peek(id string) (Sandbox, bool)
}

// An Attacher is given the Kernel when the kernel is made, before any
// step runs.
type Attacher interface {
	Hook
	Attach(k Kernel)
}

// A Halter runs once a sandbox is suspended (its memory kept where the
// runtime can), its lock still held.
type Halter interface {
	Hook
	Suspended(id string)
}

// An Importer makes a sandbox's files on this node before it resumes,
// when they are elsewhere (it was moved here from another node): the
// handle of what it made, or nil when the files are here already. An
// error fails the resume, the sandbox staying as it was.
type Importer interface {
	Hook
	Import(ctx context.Context, rec *store.Sandbox, spec backend.Spec) (*backend.Handle, error)
}

// A Remover removes what it kept of a deleted sandbox outside this host
// (its images in a shared store) once its teardown has destroyed it, also
// when a daemon finishes a teardown an earlier one began.
type Remover interface {
	Hook
	Removed(ctx context.Context, id string) error
}

// A Counter counts the limits a sandbox's running container hit that its
// backend's LimitHits cannot (the processes the daemon killed for its
// memory), adding them to hits.
type Counter interface {
	Hook
	CountHits(id string, hits *backend.LimitHits)
}

// Step is one of a sandbox's lifecycle steps, once it has ended, as an
// Observer sees it.
type Step struct {
	// Name is the step: create, resume, suspend, stop, pause or delete
	// (its teardown) from the kernel; fork and build from the services
	// beside it.
	Name string
	// Sandbox, Workspace and Runtime say whose step it was ("" where the
	// step has none: a template build's sandbox).
	Sandbox, Workspace, Runtime string
	// Pool says how a create went by its warm pool: "hit", "miss" (a
	// pool for its template and runtime had none ready), or "" (no pool
	// serves it).
	Pool string
	Took time.Duration
	// Err is why it failed; nil when it did not.
	Err error
}

// An Observer learns of each lifecycle step once it has ended (metrics,
// events). It must not block: the step's caller waits for it.
type Observer interface {
	Hook
	Observed(s Step)
}

// Change is a sandbox's change of state, once the store has it.
type Change struct {
	// Sandbox is its record after the change (as the kernel answers it:
	// without its env).
	Sandbox *store.Sandbox
	From    store.State
	// Reason says why, as the record's StateReason does; Cause is why as
	// a code (see Cause).
	Reason string
	Cause  Cause
}

// A Changer learns of each change of a sandbox's state (events). It must
// not block: the change's caller waits for it.
type Changer interface {
	Hook
	Changed(c Change)
}

// Cause is why the kernel changes a sandbox, as a stable code: what a
// caller, a timer or a failure did. A call's context carries it into the
// kernel (WithCause); a change without one is a caller's request.
type Cause struct {
	// Code is one of the Cause* constants.
	Code string
	// By says who, when a caller did it: "key acme-ci", "the
	// administrator".
	By string
}

// The causes of a change.
const (
	CauseCreated  = "created"
	CauseRequest  = "request" // a call asked for it: pause, suspend, resume, start
	CauseDeleted  = "deleted" // a call deleted it
	CauseIdle     = "idle_timeout"
	CauseLifetime = "max_lifetime"
	CauseOOM      = "oom"
	CausePids     = "process_limit"
	CauseNodeLost = "node_lost"
	CauseRecovery = "daemon_recovery" // what a daemon's start found
	CauseError    = "error"           // its container or agent failed
	CauseWoken    = "woken"           // a call to a suspended sandbox woke it
)

type causeKey struct{}

// WithCause is ctx carrying cause into the kernel's changes.
func WithCause(ctx context.Context, c Cause) context.Context {
	return context.WithValue(ctx, causeKey{}, c)
}

// CauseOf is the cause ctx carries, if any.
func CauseOf(ctx context.Context) (Cause, bool) {
	c, ok := ctx.Value(causeKey{}).(Cause)
	return c, ok
}
