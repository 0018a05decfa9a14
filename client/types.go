package client

import (
	"encoding/json"
	"time"
)

// Health is the answer of GET /v1/health.
type Health struct {
	Status   string          `json:"status"`
	Version  string          `json:"version"`
	Backends []BackendHealth `json:"backends"`
	// DefaultRuntime is the backend a create that names none gets, and
	// DefaultReason why.
	DefaultRuntime string `json:"default_runtime"`
	DefaultReason  string `json:"default_reason"`
	// Pools are the warm pools: sandboxes made ahead of time that a create
	// of the default shape takes.
	Pools []PoolHealth `json:"pools"`
	// Deleting is how many deleted sandboxes are still being torn down
	// in the background (their mounts, files and runtime state go then).
	Deleting int `json:"deleting"`
	// Goroutines is the daemon's goroutine count, for leak checks (make
	// soak compares it before and after).
	Goroutines int `json:"goroutines"`
	// Builds are the template builds under way: the shared templates'
	// and the caller's workspace's.
	Builds []TemplateBuild `json:"builds"`
	// Disk is the data dir's filesystem. The administrator's only (the
	// daemon's own key): nil for other keys.
	Disk *DiskHealth `json:"disk,omitempty"`
	// RecentErrors are the daemon's latest log records at warning level
	// or above, oldest first. The administrator's only, as they may name
	// any workspace's sandboxes: nil (absent) for other keys, empty when
	// there were none.
	RecentErrors []LogRecord `json:"recent_errors,omitzero"`
}

// DiskHealth is the space on the filesystem of the daemon's data dir, where
// templates, sandboxes' writable layers and volumes live.
type DiskHealth struct {
	// Path is the data dir.
	Path       string `json:"path"`
	TotalBytes uint64 `json:"total_bytes"`
	// FreeBytes is what may still be written, as df's "Avail" (blocks
	// reserved for root not counted).
	FreeBytes uint64 `json:"free_bytes"`
}

// LogRecord is one of the daemon's log records.
type LogRecord struct {
	Time time.Time `json:"time"`
	// Level is slog's: WARN or ERROR.
	Level   string `json:"level"`
	Message string `json:"message"`
	// Attrs are the record's attributes as text, a group's joined to
	// their keys with dots.
	Attrs map[string]string `json:"attrs"`
}

// Whoami is the body of GET /v1/whoami: who the daemon takes the caller
// for, and the defaults of what it makes.
type Whoami struct {
	// Admin: the daemon's own key (or its unix socket), which sees every
	// workspace.
	Admin bool `json:"admin"`
	// Key is the API key's name; "" for the daemon's own.
	Key string `json:"key"`
	// Workspace is the one it acts in.
	Workspace string `json:"workspace"`
	// User is the product's user its calls are for (Hutch-User), if named.
	User string `json:"user,omitempty"`
	// ToolsMode and NetworkMode are the least isolated modes the key's
	// tool calls and sandboxes may use; "" for the daemon's own key: any.
	ToolsMode   string   `json:"tools_mode"`
	NetworkMode string   `json:"network_mode"`
	Defaults    Defaults `json:"defaults"`
}

// Defaults are what the daemon gives what names no mode: a sandbox created
// without a network policy, a tool call without a mode (hutch serve's
// --network-default and --tools-mode).
type Defaults struct {
	NetworkMode string `json:"network_mode"`
	ToolsMode   string `json:"tools_mode"`
}

// PoolHealth is how full one warm pool is.
type PoolHealth struct {
	Template string `json:"template"`
	Runtime  string `json:"runtime"`
	Size     int    `json:"size"`
	Ready    int    `json:"ready"`
}

// BackendHealth describes one sandbox backend the daemon knows.
type BackendHealth struct {
	Name    string `json:"name"`
	Binary  string `json:"binary"`
	Version string `json:"version"`
	Usable  bool   `json:"usable"`
	// Pending: not usable yet, but being set up (./setup building gVisor's
	// runsc); creates of it answer unavailable until it is usable.
	Pending bool `json:"pending,omitempty"`
	// Reason says why the backend is not usable; empty when it is.
	Reason string `json:"reason"`
}

// Sandbox states.
const (
	StateCreating  = "creating"
	StateRunning   = "running"
	StatePaused    = "paused"
	StateSuspended = "suspended"
	// StateSuspending is on its way to suspended.
	StateSuspending = "suspending"
	// StateResuming is on its way back to running.
	StateResuming = "resuming"
	// StateStopping is on its way to stopped.
	StateStopping = "stopping"
	// StateStopped: its processes ended, its files kept; only a start
	// (not any call) starts it.
	StateStopped = "stopped"
	// StateDeleting is on its way out.
	StateDeleting = "deleting"
	// StateError: it ended by a failure, which its reason says; its files
	// are kept, and a start, or any call, starts it again on them.
	StateError = "error"
)

// Sandbox is a sandbox as the API describes it. Its environment is never
// returned.
type Sandbox struct {
	ID string `json:"id"`
	// Workspace owns it; User is the product's user it was made for.
	Workspace    string  `json:"workspace"`
	User         string  `json:"user,omitempty"`
	Template     string  `json:"template"`
	Runtime      string  `json:"runtime"`
	State        string  `json:"state"`
	StateReason  string  `json:"state_reason"`
	CPUs         float64 `json:"cpus"`
	MemoryMB     int64   `json:"memory_mb"`
	Pids         int64   `json:"pids"`
	DiskMB       int64   `json:"disk_mb"`
	IdleTimeoutS int64   `json:"idle_timeout_s"`
	IdleAction   string  `json:"idle_action"`
	Key          string  `json:"key,omitempty"`
	// Checkpoints is "per_tool_call" when a checkpoint is taken before
	// each tool call that changes something; "" otherwise.
	Checkpoints string `json:"checkpoints,omitempty"`
	// OnSuspend and OnResume are the commands it runs before it sleeps
	// and once it wakes.
	OnSuspend string            `json:"on_suspend,omitempty"`
	OnResume  string            `json:"on_resume,omitempty"`
	Metadata  map[string]string `json:"metadata"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// ExpiresAt is the end of its max lifetime: it is deleted then.
	ExpiresAt time.Time `json:"expires_at"`
	// Volumes are the volumes it mounts.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Network is its network policy.
	Network NetworkPolicy `json:"network"`
	// Secrets, when set, are the only secrets of its workspace its
	// commands get.
	Secrets []string `json:"secrets,omitempty"`
	// Node is the node daemon that holds it, when Hutch runs on several
	// (hutch serve --role node).
	Node string `json:"node,omitempty"`
}

// Network modes, from the most isolated.
const (
	NetworkNone      = "none"      // loopback only
	NetworkAllowlist = "allowlist" // only what Allow names, minus Deny
	NetworkFull      = "full"      // the public internet, minus Deny
)

// NetworkPolicy is where a sandbox may connect. Allow and Deny rules are
// domain names ("pypi.org", "*.github.com"), optionally with ":port", and
// addresses or CIDRs ("203.0.113.7", "203.0.113.0/24"). The host, private,
// link-local and other sandboxes' addresses are refused whatever it says.
type NetworkPolicy struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// NetworkEvent is a connection or lookup a sandbox's policy refused.
type NetworkEvent struct {
	// ID numbers the sandbox's events from 1: a cursor for After.
	ID   uint64    `json:"id"`
	Time time.Time `json:"time"`
	// Kind is "dns" or "tcp".
	Kind string `json:"kind"`
	// Dest is what was asked for: a name, "name:port (address)" or
	// "address:port".
	Dest string `json:"dest"`
	// Rule is the rule that refused, "mode" for what the mode leaves out,
	// or "always" for what no policy allows.
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// NetworkEvents is the body of GET /v1/sandboxes/{id}/network/events.
type NetworkEvents struct {
	Events []NetworkEvent `json:"events"`
	// Cursor is the ID of the newest event: ?after=Cursor lists those
	// that come next.
	Cursor uint64 `json:"cursor"`
}

// NetworkLog is the body of GET /v1/sandboxes/{id}/network/log: a
// sandbox's latest outbound connections and DNS lookups (the newest 2,000
// it made since the daemon started), each with the rule that decided it.
type NetworkLog struct {
	Entries []NetworkLogEntry `json:"entries"`
	// Cursor is the number of the newest entry: ?after=Cursor lists those
	// that come next.
	Cursor uint64 `json:"cursor"`
}

// NetworkLogEntry is one connection or lookup.
type NetworkLogEntry struct {
	Time time.Time `json:"time"`
	// Kind is dns, tcp or udp; Protocol, for TCP, http, tls or tcp.
	Kind     string `json:"kind"`
	Protocol string `json:"protocol,omitempty"`
	// Name is the host name it named (a lookup, TLS SNI, HTTP Host), Addr
	// the address it went to.
	Name string `json:"name,omitempty"`
	Addr string `json:"addr,omitempty"`
	Port int    `json:"port,omitempty"`
	// Allowed says whether the policy let it through, Rule which rule
	// decided ("mode": the sandbox's mode; "always": what no policy
	// allows), Reason why it was refused.
	Allowed  bool   `json:"allowed"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason,omitempty"`
	BytesOut int64  `json:"bytes_out,omitempty"`
	BytesIn  int64  `json:"bytes_in,omitempty"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes. Zero fields take
// the daemon's defaults: template "host", 1 CPU, 512 MiB, 256 pids, a
// 2048 MiB disk, 300 s idle timeout.
type CreateSandboxRequest struct {
	Template string `json:"template,omitempty"`
	// Runtime is "runc" or "gvisor"; empty means the daemon's default
	// (Health.DefaultRuntime).
	Runtime  string  `json:"runtime,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	// DiskMB bounds the sandbox's writable layer, /tmp included.
	DiskMB       int64             `json:"disk_mb,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	IdleTimeoutS int64             `json:"idle_timeout_s,omitempty"`
	// IdleAction is what the idle timeout does: IdleSuspend (the default:
	// files kept, and memory under gVisor; the next call resumes it),
	// IdleStop (files kept; a start starts it) or IdleDelete.
	IdleAction string `json:"idle_action,omitempty"`
	// Checkpoints "per_tool_call" takes a checkpoint before each tool
	// call that changes something (REST tools, MCP), which the call's
	// result names (undo_checkpoint) and sandbox_rollback undoes.
	Checkpoints string `json:"checkpoints,omitempty"`
	// OnSuspend is a command (sh -c, as the sandbox's user) run before
	// the sandbox is suspended or stopped (flush a database); OnResume,
	// one run once it runs again (re-read a config). Each has 60 s.
	OnSuspend string `json:"on_suspend,omitempty"`
	OnResume  string `json:"on_resume,omitempty"`
	// Key makes the create a get-or-create: the sandbox with this key is
	// returned (woken if suspended) when there is one, else made with it.
	// One per conversation, per agent, or per team.
	Key string `json:"key,omitempty"`
	// MaxLifetimeS is how long it lives at most, running or suspended,
	// before it is deleted (default 30 days).
	MaxLifetimeS int64 `json:"max_lifetime_s,omitempty"`
	// Files are placed in /home/user/workspace before the first command:
	// paths in it to their text, laid over FilesTar (at most 10000 files,
	// 32 MiB together).
	Files map[string]string `json:"files,omitempty"`
	// FilesTar is a tar (gzipped or not) unpacked into /home/user/workspace
	// before Files: regular files, directories, symlinks, hard links.
	FilesTar []byte `json:"files_tar,omitempty"`
	// FromSnapshot, instead of Template, starts from a snapshot's files.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// Volumes are mounted into the sandbox.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Network is its network policy; nil: the daemon's default mode.
	Network *NetworkPolicy `json:"network,omitempty"`
	// User is the product's user it is made for (or the Hutch-User
	// header): whose personal secrets its commands get.
	User string `json:"user,omitempty"`
	// Secrets, when set, narrows the workspace's secrets its commands get
	// to these names.
	Secrets []string `json:"secrets,omitempty"`
}

// VolumeMount is a volume a sandbox sees at Path (default /mnt/NAME; in
// /home/user or under /mnt), with Access ro, rw (the default) or none (not
// mounted).
type VolumeMount struct {
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	Access string `json:"access,omitempty"`
}

// Volume is a named persistent volume and the sandboxes that mount it.
type Volume struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	Sandboxes []string  `json:"sandboxes"`
}

// SnapshotRequest names the snapshot (a template) a sandbox's files make.
type SnapshotRequest struct {
	Name string `json:"name"`
}

// ForkRequest asks for Count copies of a sandbox (default 1, at most 100).
type ForkRequest struct {
	Count int `json:"count,omitempty"`
}

// ForkResult is what a fork made: the copies, and the ones that failed
// (each left nothing).
type ForkResult struct {
	Sandboxes []Sandbox   `json:"sandboxes"`
	Errors    []ForkError `json:"errors,omitempty"`
}

// ForkError is a copy of a fork that failed.
type ForkError struct {
	Copy    int    `json:"copy"` // 1 to the count asked for
	Code    string `json:"code"`
	Message string `json:"message"`
}

// UpdateSandboxRequest changes a sandbox's idle timeout, from now on (a
// keepalive, as E2B's setTimeout), and optionally its idle action, and its
// max lifetime, counted from now; and its network policy, for its next
// connections; give any of them.
type UpdateSandboxRequest struct {
	IdleTimeoutS int64          `json:"idle_timeout_s,omitempty"`
	IdleAction   string         `json:"idle_action,omitempty"`
	MaxLifetimeS int64          `json:"max_lifetime_s,omitempty"`
	Network      *NetworkPolicy `json:"network,omitempty"`
	// Env and Metadata replace the sandbox's own (absent: as they are):
	// its next command sees the env, running or not.
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// CPUs, MemoryMB and Pids change its limits while it is suspended or
	// stopped: its next start has them (absent: as they are).
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	// DiskMB grows its disk in place, running or not (a disk never
	// shrinks).
	DiskMB int64 `json:"disk_mb,omitempty"`
	// Volumes, when not nil, replaces the volumes a suspended or stopped
	// sandbox mounts, from its next start (empty: none).
	Volumes *[]VolumeMount `json:"volumes,omitempty"`
}

// What the idle timeout does to a sandbox.
const (
	IdleSuspend = "suspend"
	IdleStop    = "stop"
	IdleDelete  = "delete"
)

// Users a command or file operation can run as.
const (
	UserDefault = "user"
	UserRoot    = "root"
)

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec. Exactly one of Cmd
// and Command is set.
type ExecRequest struct {
	// Cmd is a program and its arguments, run directly.
	Cmd []string `json:"cmd,omitempty"`
	// Command is a shell command line, run with /bin/sh -c.
	Command string `json:"command,omitempty"`
	// Cwd defaults to /home/user/workspace.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Stdin is written to the command's standard input, which is then closed.
	Stdin string `json:"stdin,omitempty"`
	// User is "user" (the default) or "root".
	User string `json:"user,omitempty"`
	// TimeoutS defaults to 180; at most 1800.
	TimeoutS int64 `json:"timeout_s,omitempty"`
}

// CodeRequest is code to run in a sandbox: written to a file and run with
// the language's interpreter, as the sandbox user. The answer is the same
// as exec's.
type CodeRequest struct {
	// Language is python, node, typescript, deno, bun, bash or sh (go and
	// ruby where the template has them). TypeScript runs with Deno, with
	// the least permissions: read and write the workspace and /tmp, the
	// request's env variables, nothing else.
	Language string `json:"language"`
	Code     string `json:"code"`
	// Cwd defaults to /home/user/workspace.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// TimeoutS defaults to 180; at most 1800. In a context the code is
	// interrupted at it (default 300), and the context kept.
	TimeoutS int64 `json:"timeout_s,omitempty"`
	// ContextID runs the code in a code context (CreateContext), where
	// state persists between calls; Language, Cwd and Env are then the
	// context's. The answer is a CodeExecution (RunInContext).
	ContextID string `json:"context_id,omitempty"`
}

// Values of ExecResult.KilledBy and ExecExit.KilledBy.
const (
	KilledByTimeout = "timeout"
	KilledByOOM     = "oom" // the sandbox's memory limit
	KilledBySignal  = "signal"
	KilledByPids    = "pids" // a fork refused at the sandbox's process limit
)

// ExecResult is the answer of a non-streamed exec. A command that exits
// non-zero is a result, not an error.
type ExecResult struct {
	// ExitCode is 128+N when the command was killed by signal N.
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	// Truncated is set when stdout or stderr was cut at its 1 MiB cap.
	Truncated bool `json:"truncated"`
	// KilledBy is "", KilledByOOM, KilledByTimeout, KilledBySignal or
	// KilledByPids.
	KilledBy string `json:"killed_by"`
}

// ExecExit is how a streamed command ended: the data of the "exit" event.
type ExecExit struct {
	// ExitCode is 128+N when the command was killed by signal N.
	ExitCode   int   `json:"exit_code"`
	DurationMS int64 `json:"duration_ms"`
	TimedOut   bool  `json:"timed_out"`
	// KilledBy is "", KilledByOOM, KilledByTimeout, KilledBySignal or
	// KilledByPids.
	KilledBy string `json:"killed_by"`
}

// Streams of ExecEvent.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// ExecEvent is a chunk of a streamed command's output.
type ExecEvent struct {
	// Stream is Stdout or Stderr.
	Stream string
	Data   []byte
}

// File types of FileEntry.Type.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
)

// FileEntry describes a file, directory or symlink in a sandbox.
type FileEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Type is TypeFile, TypeDir or TypeSymlink.
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is the permission bits in octal, like "0644".
	Mode string `json:"mode"`
	// Permissions is like ls -l's: "-rw-r--r--".
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// SandboxStats is the body of GET /v1/sandboxes/{id}/stats: what a running
// sandbox uses, read from its cgroups and its writable layer. A limit of -1
// means none.
type SandboxStats struct {
	CPUTimeMS int64 `json:"cpu_time_ms"`
	// CPUs is its CPU limit (0: none).
	CPUs             float64 `json:"cpus"`
	MemoryBytes      int64   `json:"memory_bytes"`
	MemoryPeakBytes  int64   `json:"memory_peak_bytes"`
	MemoryLimitBytes int64   `json:"memory_limit_bytes"`
	Pids             int64   `json:"pids"`
	PidsLimit        int64   `json:"pids_limit"`
	DiskUsedBytes    int64   `json:"disk_used_bytes"`
	// What its connections carried (out: from the sandbox), and how many
	// the daemon made for it, since the daemon started.
	NetworkBytesOut    int64 `json:"network_bytes_out"`
	NetworkBytesIn     int64 `json:"network_bytes_in"`
	NetworkConnections int64 `json:"network_connections"`
}

// SandboxMetrics is the body of GET /v1/sandboxes/{id}/metrics: what a
// sandbox used over time, sampled every IntervalS seconds while it runs
// and kept for its life (the newest samples: an hour's at the default
// interval).
type SandboxMetrics struct {
	IntervalS float64         `json:"interval_s"`
	Samples   []MetricsSample `json:"samples"`
}

// MetricsSample is what a sandbox used at Time.
type MetricsSample struct {
	Time time.Time `json:"time"`
	// CPUPercent is its CPU use since the sample before, in percent of its
	// CPU limit (CPUs; of one CPU when it has none): 100 is the limit.
	CPUPercent       float64 `json:"cpu_percent"`
	CPUs             float64 `json:"cpus"`
	MemoryBytes      int64   `json:"memory_bytes"`
	MemoryLimitBytes int64   `json:"memory_limit_bytes"`
	DiskUsedBytes    int64   `json:"disk_used_bytes"`
	DiskLimitBytes   int64   `json:"disk_limit_bytes"`
	Pids             int64   `json:"pids"`
	// What its connections received and sent, since the daemon started.
	NetworkBytesIn  int64 `json:"network_bytes_in"`
	NetworkBytesOut int64 `json:"network_bytes_out"`
}

// Event is something that happened to a sandbox: GET /v1/events lists
// and follows them, webhooks are posted them.
type Event struct {
	ID        int64     `json:"id"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"` // sandbox.created, sandbox.suspended, sandbox.deleted, …
	Workspace string    `json:"workspace"`
	SandboxID string    `json:"sandbox_id,omitempty"`
	// Reason is why, as a stable code: created, request, deleted,
	// idle_timeout, max_lifetime, oom, error, woken, daemon_recovery, …;
	// Message says it to a person.
	Reason  string            `json:"reason,omitempty"`
	Message string            `json:"message,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
}

// Events is the body of GET /v1/events without a stream: the events
// after the cursor asked for, oldest first.
type Events struct {
	Events []Event `json:"events"`
}

// CreateWebhookRequest is the body of POST /v1/webhooks.
type CreateWebhookRequest struct {
	URL string `json:"url"`
	// Events are the event types it is sent; empty: all of them.
	Events []string `json:"events,omitempty"`
	// Secret signs its deliveries (16 to 256 characters); empty: one is
	// made, and answered once.
	Secret string `json:"secret,omitempty"`
}

// Webhook is a URL a workspace's events are posted to.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events,omitempty"`
	Workspace string    `json:"workspace"`
	CreatedAt time.Time `json:"created_at"`
	// Secret is in the answer of its create alone.
	Secret string `json:"secret,omitempty"`
}

// WebhookDelivery is one attempt to post an event to a webhook.
type WebhookDelivery struct {
	EventID    int64     `json:"event_id"`
	Attempt    int       `json:"attempt"`
	Time       time.Time `json:"time"`
	Status     int       `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMS float64   `json:"duration_ms"`
}

// Where a template came from.
const (
	TemplateSourceHost   = "host"
	TemplateSourceDebian = "debian"
)

// Template is a root sandboxes are made from.
type Template struct {
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	// Packages are what its build installed beyond the base system.
	Packages []string `json:"packages,omitempty"`
	// NpmPackages are what npm installed globally, after Packages.
	NpmPackages []string `json:"npm_packages,omitempty"`
	// Image and Digest are the OCI image it was made from ("archive"
	// when imported from a file).
	Image  string `json:"image,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Parent ("base@20261122T…") and Steps are a Hutchfile's: the
	// template it is layered on and its lines. Env is what its sandboxes
	// start with: a Hutchfile's ENV, and for a template built from Debian
	// the variables that point Deno, Bun and Node.js at the certificate
	// authorities it trusts.
	Parent string            `json:"parent,omitempty"`
	Steps  []string          `json:"steps,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Sandbox is the sandbox a snapshot was made from. MemoryRuntime is
	// the runtime (gvisor) whose sandboxes made from the snapshot go on
	// with its memory and processes; other runtimes start on its files.
	Sandbox       string `json:"sandbox,omitempty"`
	MemoryRuntime string `json:"memory_runtime,omitempty"`
	// Suite and Mirror are the Debian release and archive it came from.
	Suite     string `json:"suite,omitempty"`
	Mirror    string `json:"mirror,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
	// Sandboxes counts the sandboxes made from it.
	Sandboxes int `json:"sandboxes"`
}

// BuildTemplateRequest builds a template from Debian: the minimal base
// system plus Packages, from the daemon host's release and apt mirror
// unless Suite and Mirror say otherwise; then NpmPackages, installed with
// npm (one of Packages) in a sandbox of the template, which reaches only the
// npm registry. Building a name that exists makes a new version of it;
// sandboxes already made keep theirs.
type BuildTemplateRequest struct {
	Name        string   `json:"name"`
	Packages    []string `json:"packages,omitempty"`
	NpmPackages []string `json:"npm_packages,omitempty"`
	Suite       string   `json:"suite,omitempty"`
	Mirror      string   `json:"mirror,omitempty"`
	// Image, instead of the fields above, pulls an OCI image from a
	// registry (docker.io/library/python:3.12-slim, 127.0.0.1:5000/app:v1);
	// its layers flattened become the template's root.
	Image string `json:"image,omitempty"`
	// Hutchfile, instead of all the above, is a recipe (FROM, RUN, COPY,
	// ENV, WORKDIR, USER) layered on another template; Context is a tar of
	// the files its COPY lines take (at most 64 MiB).
	Hutchfile string `json:"hutchfile,omitempty"`
	Context   []byte `json:"context,omitempty"`
	// Fresh builds a Debian template from nothing, using no base system
	// or default template that an earlier build kept.
	Fresh bool `json:"fresh,omitempty"`
}

// TemplateBuild is a template build under way.
type TemplateBuild struct {
	Template string `json:"template"`
	// Step, Done, Total and Message are its last progress (see
	// BuildProgress).
	Step    string `json:"step"`
	Done    int    `json:"done"`
	Total   int    `json:"total"`
	Message string `json:"message"`
	// ElapsedS is how long it has run; LeftS how long it likely still
	// takes, from the last build of the template on this daemon (0 when
	// none is known).
	ElapsedS int `json:"elapsed_s"`
	LeftS    int `json:"left_s"`
	// Description says all that for a person.
	Description string `json:"description"`
}

// BuildProgress is how far a template build is.
type BuildProgress struct {
	// Step is "start", "index", "download", "extract", "unpack",
	// "configure" or "finish" (other names may come).
	Step string `json:"step"`
	// Done of Total units of the step; Total 0 when it is not counted.
	Done    int    `json:"done"`
	Total   int    `json:"total"`
	Message string `json:"message"`
}

// StartProcessRequest starts a background process: a command that outlives
// the request, such as a dev server. Give Cmd or Command.
type StartProcessRequest struct {
	// Name finds it again; default: the command's name and a suffix.
	Name    string            `json:"name,omitempty"`
	Cmd     []string          `json:"cmd,omitempty"`
	Command string            `json:"command,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	User    string            `json:"user,omitempty"`
	// Port is the port it listens on, if any.
	Port int `json:"port,omitempty"`
	// Stdin keeps its stdin open for input (SendProcessInput); without
	// it the process reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// ProcessInputRequest is the body of POST …/processes/{name}/stdin: Data
// (text) or DataBase64 (bytes) is written to the process's stdin, then,
// with Close, its stdin is ended.
type ProcessInputRequest struct {
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
	Close      bool   `json:"close,omitempty"`
}

// Process statuses.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
	// ProcessSuspended: its sandbox is suspended; a resume starts it
	// again with the same command and env.
	ProcessSuspended = "suspended"
)

// Process is a background process. Its env's values are never returned.
type Process struct {
	Name      string    `json:"name"`
	Cmd       []string  `json:"cmd"`
	Cwd       string    `json:"cwd,omitempty"`
	User      string    `json:"user,omitempty"`
	EnvNames  []string  `json:"env_names,omitempty"`
	Port      int       `json:"port,omitempty"`
	Status    string    `json:"status"`
	Pid       uint32    `json:"pid,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ProcessLogs is the answer of a logs call without streaming.
type ProcessLogs struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"`
}

// SignalRequest names a signal: HUP, INT, QUIT, KILL, USR1, USR2 or TERM.
type SignalRequest struct {
	Signal string `json:"signal"`
}

// Activity says why a sandbox counts as busy or idle, and what its idle
// timer does when.
type Activity struct {
	State          string    `json:"state"`
	Busy           bool      `json:"busy"`
	Reasons        []string  `json:"reasons"`
	LastActivityAt time.Time `json:"last_activity_at"`
	IdleTimeoutS   int64     `json:"idle_timeout_s"`
	IdleAction     string    `json:"idle_action"`
	// ActionAt is when the idle timer acts if nothing happens meanwhile;
	// nil when it will not (busy, or not running).
	ActionAt *time.Time `json:"action_at,omitempty"`
}

// Tool is a sandbox tool as GET /v1/tools describes it, in Hutch's own
// format (Anthropic's: name, description, input_schema).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Tool call statuses.
const (
	ToolSuccess = "success"
	ToolError   = "error"
)

// ToolResult is how a tool call ended: Status success with Result, or
// error with Error (and, for a command that failed, Result too).
type ToolResult struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *ToolFailure    `json:"error,omitempty"`
	// RanOn is where it ran: "sandbox", or "host" in the sandbox modes
	// selective and off; Why, for a selective call sent to the sandbox,
	// what made it risky.
	RanOn string `json:"ran_on,omitempty"`
	Why   string `json:"why,omitempty"`
	// Images are pictures the call made (sandbox_run_code's charts),
	// apart from Result, so that they reach a model as images.
	Images []ToolImage `json:"images,omitempty"`
	// UndoCheckpoint is the checkpoint taken before the call, in a
	// sandbox made with checkpoints per tool call: sandbox_rollback with
	// it and scope call undoes the call. Result has it too.
	UndoCheckpoint string `json:"undo_checkpoint,omitempty"`
}

// ToolImage is a picture a tool call made.
type ToolImage struct {
	MIMEType string `json:"mime_type"`
	// Data is the image's bytes (base64 in JSON).
	Data []byte `json:"data"`
}

// ToolFailure is a tool's failure, with a kind a model can act on:
// invalid_argument, not_found, timeout, command_failed, blocked_by_policy
// or failed.
type ToolFailure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// APIKey is an API key besides the daemon's own. Key, the secret, is only
// in the answer of its creation.
type APIKey struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	// ToolsMode is the least isolated sandbox mode its tool calls may use:
	// all, selective or off; the one they get when they name none.
	ToolsMode string `json:"tools_mode"`
	// NetworkMode is the least isolated network mode its sandboxes may
	// ask for: none, allowlist or full; the most they get when they name
	// none.
	NetworkMode string `json:"network_mode"`
	// Workspace is the workspace it acts in: all it sees.
	Workspace string    `json:"workspace"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateAPIKeyRequest makes an API key.
type CreateAPIKeyRequest struct {
	Name        string `json:"name"`
	ToolsMode   string `json:"tools_mode,omitempty"`
	NetworkMode string `json:"network_mode,omitempty"`
	// Workspace is the workspace it acts in (made on first use); default:
	// the caller's.
	Workspace string `json:"workspace,omitempty"`
}

// Node is a member of the cluster, as GET /v1/nodes tells the
// administrator: a node daemon (role node) as its last heartbeat told,
// or a single box (role all) answering for itself.
type Node struct {
	ID string `json:"id"`
	// Role is "node" (hutch serve --role node) or "all" (a single box).
	Role string `json:"role"`
	// URL is its API, as the API replicas reach it (a single box's:
	// its public URL).
	URL string `json:"url"`
	// State is "up", or "lost" when it was not heard from within the
	// node timeout; Reason says why it is lost.
	State  string `json:"state"`
	Reason string `json:"reason"`
	// StartedAt is when its daemon started; HeartbeatAt its last beat
	// (a single box's: now).
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// CPUs and MemoryMB are its machine's; the committed ones what the
	// limits of its live sandboxes add up to.
	CPUs              float64 `json:"cpus"`
	MemoryMB          int64   `json:"memory_mb"`
	CommittedCPUs     float64 `json:"committed_cpus"`
	CommittedMemoryMB int64   `json:"committed_memory_mb"`
	// Sandboxes counts those it holds, live or not.
	Sandboxes int `json:"sandboxes"`
	// Templates are the templates it has: version by name.
	Templates map[string]string `json:"templates"`
	// Warm counts its warm pools' ready sandboxes by TEMPLATE@RUNTIME.
	Warm map[string]int `json:"warm"`
	// Runtimes are the runtimes it can run.
	Runtimes []string `json:"runtimes"`
	// Version is its daemon's version.
	Version string `json:"version"`
}
