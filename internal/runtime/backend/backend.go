// Package backend defines what Hutch needs from a sandbox runtime. A backend
// only creates, inspects and destroys sandboxes and connects the daemon to the
// agent inside each one; exec, files and everything else go through the agent,
// so every backend behaves the same.
package backend

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/layerdiff"
)

// Backend runs sandboxes. All methods are safe for concurrent use on different
// sandboxes; calls for one sandbox are serialised by the caller (the Manager).
//
// Errors: a sandbox the backend does not know, or whose container is gone,
// yields an error wrapping errdefs.ErrNotFound; an unusable runtime yields
// errdefs.ErrUnavailable.
type Backend interface {
	// Name is the backend's stable name, stored with each sandbox ("runc").
	Name() string

	// Probe reports whether the backend can run sandboxes on this host.
	Probe(ctx context.Context) Health

	// Create starts a sandbox and returns once its agent can be dialled:
	// a call made from then on is answered as soon as the agent has started.
	// On error it leaves nothing behind.
	Create(ctx context.Context, spec Spec) (Handle, error)

	// Recover reattaches to a sandbox created by an earlier daemon process
	// from its handle. It fails with ErrNotFound when the sandbox's container
	// is no longer running; the caller then calls Destroy.
	Recover(ctx context.Context, h Handle) error

	// DialAgent connects to the agent inside a running sandbox.
	DialAgent(ctx context.Context, h Handle) (net.Conn, error)

	// Destroy stops the sandbox if it runs and removes everything it made:
	// processes, mounts, cgroups, runtime state and files. It is idempotent:
	// destroying a sandbox that is already (partly) gone succeeds.
	Destroy(ctx context.Context, h Handle) error

	// Stats reads what a running sandbox uses.
	Stats(ctx context.Context, h Handle) (Stats, error)

	// LimitHits counts the times the sandbox hit its limits since it
	// started.
	LimitHits(ctx context.Context, h Handle) (LimitHits, error)

	// List returns the IDs of every sandbox this backend has on the host,
	// including ones the caller no longer knows (to clean up after a crash).
	List(ctx context.Context) ([]string, error)

	// Capabilities says what else it can do.
	Capabilities() Capabilities
}

// Capabilities are what a backend can do beyond the Backend interface:
// each is the backend itself, seen as the interface of that capability,
// when it can, and nil when it cannot. A backend says what it does in
// this one place; callers read it rather than discover interfaces.
type Capabilities struct {
	Pause       Pauser
	Suspend     Suspender
	Move        Mover
	Network     Networked
	Watch       Watcher
	WatchMemory MemoryWatcher
	Kill        Killer
	Snapshot    Snapshotter
	Build       Builder
	Resize      Resizer
	Checkpoint  Checkpointer
	Attach      Attacher
	GrowDisk    DiskGrower
	CPU         CPUReader
}

// CPUReader reads the CPU time a sandbox has used, alone: what the idle
// timers sample every second in every sandbox, where Stats reads a dozen
// files.
type CPUReader interface {
	CPUTime(ctx context.Context, h Handle) (time.Duration, error)
}

// DiskGrower grows a sandbox's disk in place, running or not: its files
// stay, and it never shrinks (ErrFailedPrecondition, saying so).
type DiskGrower interface {
	GrowDisk(ctx context.Context, h Handle, bytes int64) error
}

// Attacher mounts binds into a running sandbox, as its create would have:
// a warm pool's sandbox takes the volumes of the create that claims it.
type Attacher interface {
	Attach(ctx context.Context, h Handle, binds []Bind) error
}

// Checkpointer records a sandbox's files (and, where the runtime
// checkpoints, its memory and processes) as they are, in milliseconds
// whatever they hold, and brings them back later. Checkpoints are kept
// with the sandbox, on its disk, until deleted or the sandbox is.
type Checkpointer interface {
	// Checkpoint records running sandbox h's files as a new checkpoint
	// named c.Name, with c.Note, and with c.Memory its memory and
	// processes too (ErrFailedPrecondition where the runtime cannot).
	// Call it after the sandbox's writes are flushed (sync in the
	// sandbox) where its kernel keeps file data of its own (gVisor). It
	// returns the checkpoint, its ID given.
	Checkpoint(ctx context.Context, h Handle, c Checkpoint) (Checkpoint, error)
	// Checkpoints lists h's, oldest first; with sizes, their sizes too,
	// which cost a walk of each one's files.
	Checkpoints(ctx context.Context, h Handle, sizes bool) ([]Checkpoint, error)
	// DeleteCheckpoint deletes checkpoint id; a missing one is
	// ErrNotFound.
	DeleteCheckpoint(ctx context.Context, h Handle, id string) error
	// Rollback makes h's files those of checkpoint id, and with memory
	// has its next Resume restore the checkpoint's memory and
	// processes. h must not run: the caller suspends it first and
	// resumes it after.
	Rollback(ctx context.Context, h Handle, id string, memory bool) error
	// Diff lists what differs between checkpoint from and checkpoint to
	// ("": h's files now); lower is the root h was made from.
	Diff(ctx context.Context, h Handle, lower, from, to string) ([]layerdiff.Change, error)
	// ArchiveCheckpoint writes a tar of paths as checkpoint id has them
	// (each alone, not what is below a directory; one it does not have
	// is left out), owned by the sandbox's own ids: to put them back
	// in the running sandbox.
	ArchiveCheckpoint(ctx context.Context, h Handle, lower, id string, paths []string, w io.Writer) error
	// ReadCheckpointFile reads regular file path as checkpoint id has
	// it ("": as h has it now), up to max bytes; found false when
	// there is none.
	ReadCheckpointFile(ctx context.Context, h Handle, lower, id, path string, max int64) (data []byte, found bool, err error)
}

// Checkpoint is one of a sandbox's checkpoints.
type Checkpoint struct {
	ID      string    `json:"id"` // c1, c2, … in the order they were made
	Name    string    `json:"name,omitempty"`
	Note    string    `json:"note,omitempty"` // why it was made: the tool call it precedes
	Created time.Time `json:"created"`
	Memory  bool      `json:"memory"` // holds memory and processes too
	// Size is what its files hold (bytes of the sandbox's writable
	// layer then), shared with the sandbox's files where they did not
	// change since; not kept, counted when listed.
	Size int64 `json:"size,omitempty"`
}

// Resizer changes a running sandbox's limits in place.
type Resizer interface {
	// Resize sets h's CPU, memory and process limits to l's (a zero
	// field: as it is). A limit the runtime cannot change while the
	// sandbox runs is errdefs.ErrFailedPrecondition, saying so, before
	// anything is changed.
	Resize(ctx context.Context, h Handle, l Limits) error
}

// Pauser freezes and thaws a sandbox: its processes keep their memory but
// get no CPU, and its agent answers nothing, until Unpause. Recover finds a
// paused sandbox as it left it.
type Pauser interface {
	Pause(ctx context.Context, h Handle) error
	Unpause(ctx context.Context, h Handle) error
}

// Suspender stops a sandbox so that it uses no memory and no CPU, keeping
// its writable layer, and starts it again from there. Its processes are
// gone (a resumed sandbox has its agent alone) and its files as they were.
// The handle stays good for Resume and Destroy, across daemon restarts.
type Suspender interface {
	// Suspend stops the sandbox. With keepMemory, a runtime that
	// checkpoints (gVisor) keeps its memory and processes for Resume;
	// without, they end, and a suspended sandbox's kept memory goes.
	// Suspending a suspended sandbox again is allowed.
	Suspend(ctx context.Context, h Handle, keepMemory bool) error
	// Resume starts a suspended sandbox with spec, the one it was created
	// with (its Files are in its layer already and are not written again).
	Resume(ctx context.Context, h Handle, spec Spec) error
}

// Mover is a Suspender whose suspended sandboxes can move to another node
// (scale-out, with a shared image store): one node exports a suspended
// sandbox, another imports it and resumes it as its own. (Its methods are
// not Export and Import: a Builder's Export is another, and the oci
// runtime is both.)
type Mover interface {
	// ExportSuspended writes suspended sandbox h's writable layer to
	// layer, a tar whose owners are the sandbox's own ids (0–65535, not
	// the host's it is mapped to), overlay whiteouts and opaque
	// directories kept; and, when the suspend kept its memory, its
	// memory image to memory, a tar: memoryKept says whether it wrote
	// one. A sandbox that is not suspended is ErrFailedPrecondition.
	ExportSuspended(ctx context.Context, h Handle, layer, memory io.Writer) (memoryKept bool, err error)
	// ImportSuspended makes suspended sandbox spec.ID here from what
	// ExportSuspended wrote on another node: its directory, a disk of
	// spec.Limits.DiskBytes, ids of this node's for it, the layer, and
	// the memory image when memory is not nil. Resume then starts it as
	// any suspended sandbox of this node, restoring the memory when
	// there is one. Archives that are not what ExportSuspended writes
	// are ErrInvalidArgument. A failure leaves nothing.
	ImportSuspended(ctx context.Context, spec Spec, layer, memory io.Reader) (Handle, error)
	// Has says whether this node has sandbox id's directory.
	Has(id string) bool
}

// Networked is a backend whose sandboxes have a network: each one's
// traffic goes to a router network namespace of its own (see sandboxnet),
// where the daemon serves it under the sandbox's policy. The namespace is
// there from Create to Destroy, across suspends.
type Networked interface {
	// Network returns the path of the sandbox's router namespace, or ""
	// if this backend's sandboxes have no network (loopback only).
	Network(ctx context.Context, h Handle) (string, error)
}

// Watcher tells when a sandbox's container ends by itself (killed from
// outside, by the host's OOM killer, a runtime crash), so that the daemon
// notices at once, not at the next call, and can say what it saw.
type Watcher interface {
	// Watch calls ended once, from a goroutine of its own, when the
	// running container of h ends while ctx lasts, with what was seen
	// ("its agent (pid 4242) was killed by signal 9 (SIGKILL)"). A
	// Destroy or Suspend ends the container too: the caller ends the
	// watch (ctx) first. Call it when the container runs (after Create,
	// Resume or Recover).
	Watch(ctx context.Context, h Handle, ended func(reason string)) error
}

// MemoryWatcher is a backend whose sandboxes have no OOM killer of their
// own inside (gVisor): past its limit, a sandbox meets the host's, which
// may end the whole sandbox. It tells when a sandbox nears its memory
// limit, so that the daemon has the process inside that holds the most
// memory killed first, as a kernel's OOM killer would.
type MemoryWatcher interface {
	// WatchMemory calls full, from a goroutine of its own, each time the
	// running container of h goes past one of the marks set below its
	// host limit, while ctx lasts. Call it when the container runs.
	WatchMemory(ctx context.Context, h Handle, full func()) error
}

// Killer is a backend that can end a sandbox's processes at once, ahead
// of its Destroy: a delete answers when nothing runs in the sandbox any
// more and leaves the slower teardown (the runtime's own delete, unmounts,
// removing its files) to the background.
type Killer interface {
	// Kill sends SIGKILL to what runs in the sandbox and returns without
	// waiting for it to end. A sandbox with nothing running (stopped,
	// suspended, never started) is not an error. Destroy still follows.
	Kill(ctx context.Context, h Handle) error
}

// Snapshotter copies what a running sandbox changed into a root of its
// own, without stopping it: snapshots and forks start from that root.
type Snapshotter interface {
	// Snapshot freezes the sandbox (unless it is paused already), applies
	// its writable layer to root, the root it was made from, as Export
	// does, and thaws it. Call it after the sandbox's writes are flushed
	// (sync in the sandbox). When memory is not "" and the runtime can
	// checkpoint, the sandbox's memory and processes, as they were when
	// the files were copied, are saved in directory memory too, for
	// Spec.Restore; saved says whether they were.
	Snapshot(ctx context.Context, h Handle, root, memory string) (saved bool, err error)
}

// Builder is what a backend offers template builds, which run their steps
// (an npm install, a Hutchfile's RUN) in a sandbox made from the root being
// built and keep what the step changed.
type Builder interface {
	// ListenIn listens on a TCP address of the sandbox's own network, its
	// loopback: what the sandbox connects to there reaches the daemon,
	// and nothing else can. It fails with errdefs.ErrFailedPrecondition
	// when the sandbox's network is not the host kernel's (gVisor's is its
	// own).
	ListenIn(ctx context.Context, h Handle, address string) (net.Listener, error)

	// Export stops the sandbox's processes and applies what they changed
	// (its writable layer: new and changed files, and deletions) to dir,
	// the root it was made from, with the sandbox's own ids. Replaced files
	// are new inodes: a root that shares files with another by hard links
	// changes alone. Call Destroy afterwards.
	Export(ctx context.Context, h Handle, dir string) error
}

// Stats is what a sandbox uses, as its cgroups and its writable layer tell.
type Stats struct {
	CPUTime time.Duration // CPU time of all its processes, user and system
	// CPULimit is how many CPUs its quota lets it use at once; 0: no
	// quota.
	CPULimit      float64
	MemoryBytes   int64 // memory charged now, page cache included
	MemoryPeak    int64 // the most ever charged
	MemoryLimit   int64
	Pids          int64 // tasks (processes and threads) now
	PidsLimit     int64
	DiskUsedBytes int64 // what its writable layer holds
}

// Spec is what a sandbox is made from.
type Spec struct {
	ID       string
	Hostname string

	// RootDir is the read-only template root. The sandbox sees it with a
	// private writable layer on top.
	RootDir string
	// Binds are host paths mounted into the sandbox (read-only unless said).
	Binds []Bind
	// Files are written into the writable layer before start, keyed by
	// absolute path in the sandbox (per-sandbox /etc/passwd, /etc/hosts, …).
	Files map[string]File

	// Env is the environment of the agent, inherited by every process it
	// starts. Values may be secret: never log them.
	Env []string

	Limits Limits

	// Restore, when not "", is a memory image a snapshot saved (see
	// Snapshotter): a runtime that can checkpoint starts the sandbox's
	// processes from it, on Files as they were then; if that fails, or
	// the runtime cannot, the sandbox starts afresh on the files.
	Restore string
}

// Bind mounts a host path into the sandbox.
type Bind struct {
	Source      string
	Destination string
	Writable    bool
}

// File is a file placed in the sandbox's writable layer before it starts.
type File struct {
	Data []byte
	Mode uint32
	UID  int
	GID  int
	Dir  bool   // make a directory instead of a file
	Link string // make a symlink to Link instead of a file (Mode unused)
}

// Limits are the resources a sandbox may use.
type Limits struct {
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// DiskBytes bounds what the sandbox's writable layer holds, /tmp
	// included: past it, writes fail with ENOSPC inside.
	DiskBytes int64
}

// Handle identifies a created sandbox. State is opaque to everyone but the
// backend that made it; the store persists it so that Recover works after a
// daemon restart.
type Handle struct {
	ID      string
	Backend string
	State   []byte
}

// LimitHits counts what a sandbox's limits stopped.
type LimitHits struct {
	// OOMKills counts the processes the kernel's OOM killer killed for the
	// memory limit.
	OOMKills int64
	// PidsMax counts forks refused (EAGAIN) at the process limit. It stays
	// 0 where the backend cannot tell (gVisor, whose limit is inside its
	// own kernel).
	PidsMax int64
	// OOMMayFault means an OOM kill can end a process with SIGSEGV or
	// SIGBUS instead of SIGKILL: under gVisor on systrap, when the host's
	// OOM killer takes a process's stub while gVisor's kernel is handling
	// one of its page faults, the fault fails before the stub is found
	// dead. Or the fault fails at the limit with no kill at all, which
	// MemoryFull counts.
	OOMMayFault bool
	// MemoryFull counts the times the sandbox's memory reached its host
	// limit (cgroup v1's failcnt, v2's "max" event); read only where
	// OOMMayFault, as under runc the limit is reached whenever the
	// kernel reclaims a sandbox's page cache.
	MemoryFull int64
}

// Health is what Probe found.
type Health struct {
	Name    string `json:"name"`
	Binary  string `json:"binary,omitempty"`
	Version string `json:"version,omitempty"`
	Usable  bool   `json:"usable"`
	// Pending: not usable yet, but being set up (its binary being built);
	// the core probes it again when asked for it.
	Pending bool   `json:"pending,omitempty"`
	Reason  string `json:"reason,omitempty"`
}
