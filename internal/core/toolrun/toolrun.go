// Package toolrun runs the calls of the LLM tool catalogue (package tools)
// for the daemon: the file tools in a sandbox's agent, on the sandbox's
// files; sandbox_run_command as a command in the sandbox; and, in the
// sandbox modes that allow it, any of them on the host (host.go). It also
// serves the download URLs sandbox_download_url signs (downloads.go). The
// catalogue itself is imported by the in-sandbox agent, so its daemon side
// lives here, a service beside the lifecycle core that reaches sandboxes
// through the core's Acquire.
package toolrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/net/netproxy"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Sandboxes is what the service needs of the lifecycle core
// (*core.Manager has it): a sandbox's record, and a sandbox held
// running for one call.
type Sandboxes interface {
	Get(ctx context.Context, id string) (*store.Sandbox, error)
	Acquire(ctx context.Context, id string) (r *core.Running, release func(), err error)
}

// Config wires a Service.
type Config struct {
	Sandboxes Sandboxes
	// Networks tells what a sandbox's network policy refused (the network
	// plane): a command's refusals follow its stderr. Nil: not told.
	Networks Networks
	// Downloads signs download URLs (sandbox_download_url), which start
	// with PublicURL, the daemon's address as callers reach it. Nil: the
	// tool says downloads are off.
	Downloads *download.Signer
	PublicURL string
	// Mode is the sandbox mode of tool calls that name none (tools.ModeAll
	// when ""); HostDir, where calls run on the host in the other modes,
	// which are refused without it (host.go); HostUser, who they run as
	// there (ResolveHostUser: "" is HostDir's owner, never root).
	Mode     string
	HostDir  string
	HostUser string
	// Checkpoints keeps the sandboxes' checkpoints: the checkpoint tools,
	// and a checkpoint before each call that changes files where a
	// sandbox asks. Nil: neither.
	Checkpoints Checkpoints
	// Desktops drives the sandboxes' desktops: the computer tools. Nil:
	// they say there are none.
	Desktops Desktops
	Logger   *slog.Logger
}

// Service runs tool calls and serves downloads. It is safe for concurrent
// use; each call holds its sandbox running only while it runs.
type Service struct {
	sandboxes Sandboxes
	networks  Networks
	downloads *download.Signer
	publicURL string
	mode      string
	hostDir   string
	// hostUser is who calls on the host run as; hostUserErr, why there is
	// none, which refuses them.
	hostUser    HostUser
	hostUserErr error
	checkpoints Checkpoints
	desktops    Desktops
	log         *slog.Logger
}

// New returns a Service as cfg says.
func New(cfg Config) *Service {
	s := &Service{
		sandboxes:   cfg.Sandboxes,
		networks:    cfg.Networks,
		downloads:   cfg.Downloads,
		publicURL:   strings.TrimSuffix(cfg.PublicURL, "/"),
		mode:        cmp.Or(cfg.Mode, tools.ModeAll),
		hostDir:     cfg.HostDir,
		checkpoints: cfg.Checkpoints,
		desktops:    cfg.Desktops,
		log:         cfg.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.hostDir != "" {
		s.hostDir = filepath.Clean(s.hostDir)
		s.hostUser, s.hostUserErr = ResolveHostUser(cfg.HostUser, s.hostDir)
	}
	return s
}

// Networks is the network plane's log of what each sandbox's policy
// refused (network.Plane.Log): nil for one without a network.
type Networks interface {
	Log(id string) *netproxy.Log
}

// Call is a call of a tool of the catalogue.
type Call struct {
	Name string
	Args json.RawMessage
	User string // who it acts as in the sandbox (default: the sandbox user)
	// ForUser is the product's user it is for: a command it runs gets
	// that user's personal secrets (default: the sandbox's user).
	ForUser string
	// Mode is tools.ModeAll, ModeSelective or ModeOff; "" means the
	// daemon's (Config.Mode).
	Mode string
}

// Outcome is how a tool call ended: its result, its failure, or both (a
// command that failed still has its output).
type Outcome struct {
	Result json.RawMessage
	Error  *tools.Error
	// Images are pictures the call made (sandbox_run_code's charts), for
	// a client to show a model as images rather than as text.
	Images []Image
	// Where is where it ran: "sandbox" or "host"; Why, in selective
	// mode, what made it risky.
	Where, Why string
	// Checkpoint is the checkpoint taken before it (checkpoints per
	// tool call), which sandbox_rollback with scope call undoes it by;
	// "" when none was.
	Checkpoint string
}

// Image is a picture a tool call made.
type Image struct {
	MIMEType string
	Data     []byte
}

// Where tool calls run.
const (
	whereSandbox = "sandbox"
	whereHost    = "host"
)

// RunTool runs a tool call in sandbox id (waking it), or on the host as
// its mode says (host.go). out, when not nil, gets a command's output as
// it comes. The error is the call's (no such sandbox or tool, a mode this
// daemon refuses); a tool's own failure is in the outcome.
func (s *Service) RunTool(ctx context.Context, id string, call Call, out exec.Output) (Outcome, error) {
	tool, ok := tools.Lookup(call.Name)
	if !ok {
		return Outcome{}, errdefs.NotFound("no tool %q (GET /v1/tools lists them)", call.Name)
	}
	if isCheckpointTool(tool.Name) { // about the sandbox, whatever the mode
		outcome, err := s.checkpointTool(ctx, id, call)
		outcome.Where = whereSandbox
		return outcome, err
	}
	if tools.Computer(tool.Name) { // the sandbox's desktop, whatever the mode
		outcome, err := s.runInSandbox(ctx, id, tool, call, nil)
		outcome.Where = whereSandbox
		return outcome, err
	}
	onHost, why, err := s.toolOnHost(call)
	if err != nil {
		return Outcome{}, err
	}
	if onHost {
		if _, err := s.sandboxes.Get(ctx, id); err != nil {
			return Outcome{}, err
		}
		outcome, err := s.runOnHost(ctx, call, out)
		outcome.Where = whereHost
		return outcome, err
	}
	outcome, err := s.runInSandbox(ctx, id, tool, call, out)
	outcome.Where, outcome.Why = whereSandbox, why
	return outcome, err
}

func (s *Service) runInSandbox(ctx context.Context, id string, tool tools.Tool, call Call, out exec.Output) (Outcome, error) {
	r, release, err := s.sandboxes.Acquire(ctx, id) // busy while it runs, as a command is
	if err != nil {
		return Outcome{}, err
	}
	defer release()
	undo, err := s.checkpointFirst(ctx, r, tool)
	if err != nil {
		return Outcome{}, err
	}
	outcome, err := s.runTool(ctx, r, tool, call, out)
	return withUndo(outcome, undo), err
}

func (s *Service) runTool(ctx context.Context, r *core.Running, tool tools.Tool, call Call, out exec.Output) (Outcome, error) {
	switch {
	case tool.Name == tools.RunCommand:
		return runCommandTool(ctx, r, s.refusals(r.ID()), call, out)
	case tool.Name == tools.DownloadURL:
		return s.downloadTool(ctx, r, call.Args, call.User)
	case tool.Name == tools.RunCode:
		return s.runCodeTool(ctx, r, call)
	case tools.Computer(tool.Name):
		return s.computerTool(ctx, r.ID(), call)
	case !tool.InSandbox:
		return Outcome{}, errdefs.NotImplemented("tool %s runs nowhere", tool.Name)
	}
	res, err := r.Agent().RunTool(ctx, tool.Name, call.Args, rootfs.Workspace, rootfs.UserOr(call.User))
	var failed *tools.Error
	if errors.As(err, &failed) {
		return Outcome{Error: failed}, nil
	}
	if err != nil {
		return Outcome{}, r.Err(ctx, err)
	}
	return Outcome{Result: res}, nil
}

func toolFailure(kind, format string, args ...any) Outcome {
	return Outcome{Error: &tools.Error{Kind: kind, Message: fmt.Sprintf(format, args...)}}
}

// refusals is the log of what sandbox id's network policy refused, or nil.
func (s *Service) refusals(id string) *netproxy.Log {
	if s.networks == nil {
		return nil
	}
	return s.networks.Log(id)
}
