package api

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/checkpoints"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/files"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/core/samples"
	"github.com/hutchdev/hutch/internal/core/template"
	"github.com/hutchdev/hutch/internal/core/toolrun"
	"github.com/hutchdev/hutch/internal/core/volume"
	"github.com/hutchdev/hutch/internal/front/preview"
	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/net/netproxy"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// The services beside the lifecycle core, as the API consumes them. Each
// is wired by the daemon (internal/app/daemon) and reaches sandboxes through
// the core's Acquire.

// Execs runs commands and code in sandboxes and keeps their background
// processes (internal/core/exec).
type Execs interface {
	Exec(ctx context.Context, id string, req exec.Request, out exec.Output) (exec.Result, error)
	RunCode(ctx context.Context, id string, req exec.CodeRequest, out exec.Output) (exec.Result, error)
	StartProcess(ctx context.Context, id string, req exec.ProcessRequest) (exec.ProcessInfo, error)
	ListProcesses(ctx context.Context, id string) ([]exec.ProcessInfo, error)
	ProcessLogs(ctx context.Context, id, name string, follow bool, out exec.Output) error
	SignalProcess(ctx context.Context, id, name, signal string) error
	ProcessInput(ctx context.Context, id, name string, data []byte, end bool) error
	RestartProcess(ctx context.Context, id, name string) (exec.ProcessInfo, error)
	CreateContext(ctx context.Context, id string, req exec.ContextRequest) (exec.Context, error)
	Contexts(ctx context.Context, id string) ([]exec.Context, error)
	RestartContext(ctx context.Context, id, contextID string) (exec.Context, error)
	DeleteContext(ctx context.Context, id, contextID string) error
	RunInContext(ctx context.Context, id string, req exec.ContextCode, fn func(exec.CodeEvent) error) (exec.CodeEnd, error)
	StartService(ctx context.Context, id string, req exec.ServiceRequest) (exec.ServiceInfo, error)
	Services(ctx context.Context, id string) ([]exec.ServiceInfo, error)
	Service(ctx context.Context, id, name string) (exec.ServiceInfo, error)
	RestartService(ctx context.Context, id, name string) (exec.ServiceInfo, error)
	StopService(ctx context.Context, id, name string) (exec.ServiceInfo, error)
	DeleteService(ctx context.Context, id, name string) error
	RevokeServiceLinks(ctx context.Context, id, name string) error
	// PortStarting says whether a service on a sandbox's port is starting.
	PortStarting(ctx context.Context, id string, port int) bool
	ServiceEvents(ctx context.Context, id, name string, fn func(exec.ServiceInfo) error) error
	PublicPort(ctx context.Context, id string, port int) (bool, error)
	DeleteProcess(ctx context.Context, id, name string) error
	OpenTerminal(ctx context.Context, id string, req exec.TerminalRequest) (*exec.Terminal, error)
}

// Files reads and changes sandboxes' files, through their agents.
type Files interface {
	ReadFile(ctx context.Context, id, p, user string) (io.ReadCloser, error)
	WriteFile(ctx context.Context, id, p, user string, r io.Reader) (files.Entry, error)
	Upload(ctx context.Context, id, name, user string, r io.Reader) (files.Entry, error)
	Stat(ctx context.Context, id, p, user string) (files.Entry, error)
	Remove(ctx context.Context, id, p, user string) error
	ListDir(ctx context.Context, id, p, user string, depth int) ([]files.Entry, error)
	MakeDir(ctx context.Context, id, p, user string) (files.Entry, error)
	Move(ctx context.Context, id, src, dst, user string) (files.Entry, error)
	Watch(ctx context.Context, id, p, user string, recursive bool, fn func(files.WatchEvent) error) error
}

// Tools runs the tool catalogue's calls, and serves the downloads its
// sandbox_download_url signs.
type Tools interface {
	RunTool(ctx context.Context, id string, call toolrun.Call, out exec.Output) (toolrun.Outcome, error)
	Download(ctx context.Context, token string, may func(sandboxID string) error, secrets *redact.Set) (name string, body io.ReadCloser, err error)
	// DownloadURL signs a URL of one file of sandbox id, valid for an hour.
	DownloadURL(id, path string) (string, error)
}

// Templates keeps the templates: built, imported, and snapshots of
// sandboxes (a fork is a snapshot and sandboxes made from it).
type Templates interface {
	List(ctx context.Context) ([]template.Info, error)
	Get(ctx context.Context, name string) (template.Info, error)
	Delete(ctx context.Context, name string) error
	Build(ctx context.Context, req template.BuildRequest, progress func(rootfs.Progress)) (template.Info, error)
	Import(ctx context.Context, name string, r io.Reader, progress func(rootfs.Progress)) (template.Info, error)
	Snapshot(ctx context.Context, id, name string) (rootfs.Info, error)
	// Fork gives the copies the source's network policy, which ceiling
	// (the caller's key's network mode, "" for any) must allow.
	// A copy that failed is in its place with its error; the call fails
	// when none was made.
	Fork(ctx context.Context, id string, count int, ceiling netpolicy.Mode) ([]template.ForkResult, error)
	Resolve(ws, name string, admin bool) (string, error)
	// Builds lists the template builds under way.
	Builds() []rootfs.BuildUnderWay
	// Archive writes a version of a template as an archive (see
	// rootfs.Store.WriteArchive) and returns its SHA-256.
	Archive(ctx context.Context, w io.Writer, name, version string) (string, error)
}

// Checkpoints keeps sandboxes' checkpoints (internal/core/checkpoints).
type Checkpoints interface {
	Create(ctx context.Context, id string, req checkpoints.Request) (checkpoints.Checkpoint, error)
	List(ctx context.Context, id string) ([]checkpoints.Checkpoint, error)
	Delete(ctx context.Context, id, c string) error
	Diff(ctx context.Context, id, c string) ([]checkpoints.Change, bool, error)
	FileDiff(ctx context.Context, id, c, path string) (string, error)
	Rollback(ctx context.Context, id, c string, memory bool) (*store.Sandbox, error)
}

// Networks is the network plane: the sandboxes' policies, what they
// refused and what their connections carried.
type Networks interface {
	Set(ctx context.Context, id string, p netpolicy.Policy) error
	Events(ctx context.Context, id string) (*netproxy.Log, error)
	History(ctx context.Context, id string) (*netproxy.History, error)
	Proposal(ctx context.Context, id string) (netpolicy.Policy, error)
	Counters(id string) network.Counters
}

// Samples are what the sandboxes used over time (internal/core/samples).
type Samples interface {
	Samples(id string, since time.Time) []samples.Sample
	Interval() time.Duration
}

// Workspaces keeps the workspaces' quotas and tells their usage.
type Workspaces interface {
	Workspaces(ctx context.Context) ([]store.Workspace, error)
	Usage(ctx context.Context, ws string) (quota.Usage, error)
	SetQuota(ctx context.Context, ws string, q store.Quota) error
}

// Volumes keeps the volumes sandboxes mount.
type Volumes interface {
	Create(ctx context.Context, name string) (volume.Info, error)
	List(ctx context.Context) ([]volume.Info, error)
	Delete(ctx context.Context, name string) error
}

// Previews passes preview requests on to sandboxes' ports
// (internal/front/preview).
type Previews interface {
	// Route says where a request whose Host is host goes by host
	// routing, and false when it names no preview.
	Route(host string) (preview.Target, bool)
	// Serve passes r on to t, or returns the error to answer with.
	Serve(w http.ResponseWriter, r *http.Request, t preview.Target) error
	// Domain is host routing's domain, "" when it is off.
	Domain() string
}
