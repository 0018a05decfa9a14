// Package exec runs commands and code in sandboxes and keeps their
// background processes: a service beside the lifecycle core, reaching each
// sandbox through the core's Acquire. Its Request, Result and Run are how
// every service runs a command in a sandbox it holds (files, tools,
// template builds and snapshots). What the core must do itself for
// background processes (note those that run before a suspend, start them
// again after a resume) stays in the core, behind core.Running; this
// package starts, lists, signals, restarts and forgets them on request.
package exec

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/events"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Store is what the service keeps background processes in, and reads
// sandboxes' records from (store.Store has it).
type Store interface {
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	ListProcesses(ctx context.Context, sandboxID string) ([]*store.Process, error)
	PutProcess(ctx context.Context, p *store.Process) error
	DeleteProcess(ctx context.Context, sandboxID, name string) error
	SetLinksRevoked(ctx context.Context, sandboxID, name string, at time.Time) error
}

// Service runs commands, code and background processes in the core's
// sandboxes. Its methods are safe for concurrent use; each call that needs
// a sandbox wakes it (a suspended one resumes, a paused one thaws) and
// holds it running until the call returns.
type Service struct {
	core   *core.Manager
	procs  *processes.Keeper
	store  Store
	log    *slog.Logger
	states serviceStates // what is seen of services' runs (services.go)
	// emit adds an event to the sandboxes' events (see OnEvent), and
	// observer times each exec (see OnStep).
	emit     func(*store.Event)
	observer hook.Observer
}

// OnStep has the service tell o how long each exec took (the daemon's
// metrics). Call it before the service is used.
func (s *Service) OnStep(o hook.Observer) { s.observer = o }

// OnEvent has the service tell emit of what it sees happen: a service's
// status change, a command ended by a limit (internal/core/events).
// Call it before the service is used.
func (s *Service) OnEvent(emit func(*store.Event)) { s.emit = emit }

// event tells the events of ev, if anyone listens.
func (s *Service) event(ev *store.Event) {
	if s.emit != nil {
		s.emit(ev)
	}
}

// New returns a Service over core's sandboxes, keeping background
// processes in st (the core's store), which procs (the core's processes
// hook) keeps across suspends; log may be nil.
func New(core *core.Manager, procs *processes.Keeper, st Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{core: core, procs: procs, store: st, log: log}
}

// attrSandbox is the log attribute of a sandbox's id, as the core's.
const attrSandbox = "sandbox_id"

// Exec runs a command in sandbox id: see Run. A command
// the sandbox would refuse is refused before the sandbox is woken for it.
func (s *Service) Exec(ctx context.Context, id string, req Request, out Output) (Result, error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer release()
	began := time.Now()
	res, err := Run(ctx, r, req, out)
	if s.observer != nil {
		s.observer.Observed(hook.Step{Name: "exec", Sandbox: r.ID(), Workspace: r.Workspace(), Runtime: r.Runtime(), Took: time.Since(began), Err: err})
	}
	if err == nil && (res.KilledBy == KilledByOOM || res.KilledBy == KilledByPids) {
		s.limitEnded(r.ID(), r.Workspace(), "command", res)
	}
	return res, err
}

// limitEnded tells the events that a command or process of sandbox id
// ended at a limit of the sandbox's (res.KilledBy).
func (s *Service) limitEnded(id, ws, kind string, res Result) {
	reason, msg := hook.CauseOOM, "killed for the sandbox's memory limit"
	if res.KilledBy == KilledByPids {
		reason, msg = hook.CausePids, "failed at the sandbox's process limit"
	}
	s.event(&store.Event{Workspace: ws, Sandbox: id, Type: events.ProcessExited, Reason: reason, Message: "a " + kind + " " + msg,
		Data: map[string]string{"kind": kind, "exit_code": strconv.Itoa(res.ExitCode), "killed_by": res.KilledBy}})
}
