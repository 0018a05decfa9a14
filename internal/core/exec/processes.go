package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Bounds of background processes.
const (
	maxProcesses = 32
	// restartGrace is how long a restart waits after SIGTERM before it
	// kills the process's tree.
	restartGrace = 5 * time.Second
)

// processName is what a background process or a service slot may be
// called. Compiled on first use (see internal/trust/workspace's validName).
var processName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`) })

// selectProcess selects background process name by its tag.
func selectProcess(name string) agentclient.Selector {
	return agentclient.Tag(processes.Tag(name))
}

// ProcessRequest starts a background process.
type ProcessRequest struct {
	// Name finds it again; unique in its sandbox. Default: made from the
	// command and a random suffix.
	Name string
	// Exactly one of Cmd (an argv) and Command (run by /bin/sh -c).
	Cmd     []string
	Command string
	Cwd     string // default: the workspace
	Env     map[string]string
	User    string // default: the sandbox user
	// Port is the port it listens on, if any: what a preview reaches.
	Port int
	// ForUser is the product's user it runs for: whose personal secrets
	// it gets, at each start ("": the sandbox's user).
	ForUser string
	// Stdin keeps its stdin open for ProcessInput (else it reads
	// /dev/null).
	Stdin bool
}

// Process statuses.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
	// ProcessSuspended: its sandbox is suspended; a resume starts it again.
	ProcessSuspended = "suspended"
)

// ProcessInfo describes a background process. Its env's values are never
// shown, only their names.
type ProcessInfo struct {
	Name      string
	Argv      []string
	Cwd       string
	User      string
	EnvNames  []string
	Port      int
	Status    string
	Pid       uint32 // when running
	CreatedAt time.Time
}

func processInfo(p *store.Process, status string, pid uint32) ProcessInfo {
	var names []string
	for k := range p.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	return ProcessInfo{Name: p.Name, Argv: p.Argv, Cwd: p.Cwd, User: p.User, EnvNames: names,
		Port: p.Port, Status: status, Pid: pid, CreatedAt: p.CreatedAt}
}

// StartProcess starts a background process in sandbox id (waking it) and
// returns it running. A process of the same name that has exited is
// replaced; one that runs is a conflict.
func (s *Service) StartProcess(ctx context.Context, id string, req ProcessRequest) (ProcessInfo, error) {
	return s.startProcess(ctx, id, req, nil)
}

// startProcess is StartProcess; service, when not nil, says what makes the
// process a service (store.Process's Public and Slot).
func (s *Service) startProcess(ctx context.Context, id string, req ProcessRequest, service *ServiceRequest) (ProcessInfo, error) {
	argv, err := Request{Cmd: req.Cmd, Command: req.Command}.Argv()
	if err != nil {
		return ProcessInfo{}, err
	}
	if req.Name == "" {
		req.Name = defaultProcessName(argv)
	}
	if !processName().MatchString(req.Name) {
		return ProcessInfo{}, errdefs.InvalidArgument("process name %q must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
	}
	if req.Port < 0 || req.Port > 65535 {
		return ProcessInfo{}, errdefs.InvalidArgument("port must be between 1 and 65535, got %d", req.Port)
	}
	for k := range req.Env {
		if !rootfs.ValidEnvName(k) {
			return ProcessInfo{}, errdefs.InvalidArgument("env name %q is not a valid variable name", k)
		}
	}
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return ProcessInfo{}, err
	}
	defer release()
	known, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return ProcessInfo{}, err
	}
	i := slices.IndexFunc(known, func(p *store.Process) bool { return p.Name == req.Name })
	if i < 0 && len(known) >= maxProcesses {
		return ProcessInfo{}, errdefs.ResourceExhausted("sandbox %s has %d processes, the most it may have: delete one first", id, len(known))
	}
	p := &store.Process{
		SandboxID: id, Name: req.Name, Argv: argv, Cwd: req.Cwd, User: req.User,
		Env: req.Env, Port: req.Port, Running: true, CreatedAt: time.Now().UTC(), ForUser: req.ForUser, Stdin: req.Stdin,
	}
	if service != nil {
		p.Public, p.Slot = service.Public, service.Slot
	}
	pid, err := processes.Start(ctx, r, p)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return ProcessInfo{}, errdefs.Conflict("process %q runs already in sandbox %s: restart it, or delete it first", req.Name, id)
	}
	if err != nil {
		return ProcessInfo{}, err
	}
	if err := s.store.PutProcess(context.WithoutCancel(ctx), p); err != nil {
		s.signalProcess(context.WithoutCancel(ctx), r, p.Name, syscall.SIGKILL)
		return ProcessInfo{}, err
	}
	s.newRun(id, p.Name, pid)
	s.log.Info("process started", attrSandbox, id, "process", p.Name, "pid", pid)
	return processInfo(p, ProcessRunning, pid), nil
}

// defaultProcessName is the command's base name and a random suffix.
func defaultProcessName(argv []string) string {
	base := argv[0]
	if argv[0] == "/bin/sh" && len(argv) == 3 {
		base = strings.Fields(argv[2] + " x")[0]
	}
	base = base[strings.LastIndex(base, "/")+1:]
	base = strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return -1
	}, base)
	base = strings.TrimLeft(base, "._-")
	if base == "" {
		base = "process"
	}
	return fmt.Sprintf("%.40s-%s", base, create.NewID()[:6])
}

// ListProcesses lists a sandbox's background processes. It does not wake a
// suspended sandbox: its processes show as suspended (those a resume
// starts again) or exited. Nor does it count as activity.
func (s *Service) ListProcesses(ctx context.Context, id string) ([]ProcessInfo, error) {
	_, _, out, err := s.processes(ctx, id)
	return out, err
}

// processes is ListProcesses with the records it read: the sandbox's, and
// its processes', in the order of the infos.
func (s *Service) processes(ctx context.Context, id string) (*store.Sandbox, []*store.Process, []ProcessInfo, error) {
	rec, err := s.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	known, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	// Looked at without waking the sandbox nor counting as activity: a
	// console that polls a sandbox's processes does not keep it from its
	// idle timeout.
	running, err := s.procs.Live(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make([]ProcessInfo, 0, len(known))
	for _, p := range known {
		status := ProcessExited
		pid, ok := running[p.Name]
		switch {
		case ok:
			status = ProcessRunning
		case running == nil && p.Running && rec.State == store.Paused:
			status = ProcessRunning // frozen with its sandbox
		case running == nil && p.Running:
			status = ProcessSuspended
		}
		out = append(out, processInfo(p, status, pid))
	}
	return rec, known, out, nil
}

// ProcessLogs sends a background process's kept output (its latest 1 MiB)
// to out and, with follow, what it writes next until it exits or ctx ends.
// It wakes a suspended sandbox; after a resume under runc the logs start
// with the process's new run. While it follows, the call holds the
// sandbox awake, as any call does.
func (s *Service) ProcessLogs(ctx context.Context, id, name string, follow bool, out Output) error {
	r, release, p, err := s.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs, err := r.Agent().Replay(sctx, processes.Tag(p.Name), follow)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // not started since the agent started: no logs yet
	}
	if err != nil {
		return err
	}
	defer func() { _ = logs.Close() }()
	for {
		ev, err := logs.Recv()
		switch {
		case errors.Is(err, io.EOF), err != nil && ctx.Err() != nil:
			return nil // the end, or the caller left
		case err != nil:
			return err
		}
		if ev.Exit != nil {
			return nil
		}
		if err := deliver(out, ev); err != nil {
			return err
		}
	}
}

// ProcessInput writes data to a running background process's stdin, then,
// with end, ends it (the process reads EOF). A process started without
// Stdin is a failed precondition; one that does not run, not found.
func (s *Service) ProcessInput(ctx context.Context, id, name string, data []byte, end bool) error {
	r, release, p, err := s.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	if !p.Stdin {
		return errdefs.FailedPrecondition("process %q of sandbox %s was started without stdin: start it with stdin to give it input", name, id)
	}
	tag := agentclient.Tag(processes.Tag(p.Name))
	if len(data) > 0 {
		if err := r.Agent().Input(ctx, tag, data); err != nil {
			return r.Err(ctx, notRunning(err, name, id))
		}
	}
	if end {
		if err := r.Agent().CloseInput(ctx, tag); err != nil {
			return r.Err(ctx, notRunning(err, name, id))
		}
	}
	return nil
}

// notRunning says that a process is not running, for an agent's not found.
func notRunning(err error, name, id string) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.NotFound("process %q of sandbox %s does not run", name, id)
	}
	return err
}

// SignalProcess sends a signal to a background process: SIGKILL kills its
// whole tree, the others (HUP, INT, QUIT, USR1, USR2, TERM) go to its main
// process.
func (s *Service) SignalProcess(ctx context.Context, id, name, signal string) error {
	sig, err := parseSignal(signal)
	if err != nil {
		return err
	}
	r, release, p, err := s.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	err = sendSignal(ctx, r, p.Name, sig)
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.FailedPrecondition("process %q of sandbox %s is not running", name, id)
	}
	return err
}

// sendSignal signals a background process by its tag; ErrNotFound when it
// is not running.
func sendSignal(ctx context.Context, r *core.Running, name string, sig syscall.Signal) error {
	return r.Agent().Signal(ctx, selectProcess(name), sig)
}

// parseSignal reads a signal's name, with or without SIG.
func parseSignal(name string) (syscall.Signal, error) {
	if sig, ok := processSignals[strings.TrimPrefix(strings.ToUpper(name), "SIG")]; ok {
		return sig, nil
	}
	return 0, errdefs.InvalidArgument("signal must be one of HUP, INT, QUIT, KILL, USR1, USR2, TERM; got %q", name)
}

// processSignals are the signals a background process may be sent.
var processSignals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
}

// RestartProcess stops a background process's tree (SIGTERM, then after
// 5 s SIGKILL; see stopProcess) if anything of it runs, and starts it
// again with the same command and env once nothing of the old tree is
// left.
func (s *Service) RestartProcess(ctx context.Context, id, name string) (ProcessInfo, error) {
	r, release, p, err := s.process(ctx, id, name)
	if err != nil {
		return ProcessInfo{}, err
	}
	defer release()
	if err := s.stopProcess(ctx, r, p.Name); err != nil {
		return ProcessInfo{}, err
	}
	pid, err := processes.Start(ctx, r, p)
	if err != nil {
		return ProcessInfo{}, err
	}
	p.Running = true
	if err := s.store.PutProcess(context.WithoutCancel(ctx), p); err != nil {
		return ProcessInfo{}, err
	}
	s.newRun(id, p.Name, pid)
	s.log.Info("process restarted", attrSandbox, id, "process", p.Name, "pid", pid)
	return processInfo(p, ProcessRunning, pid), nil
}

// DeleteProcess kills a background process's tree and forgets it.
func (s *Service) DeleteProcess(ctx context.Context, id, name string) error {
	r, release, p, err := s.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	s.signalProcess(ctx, r, p.Name, syscall.SIGKILL)
	return s.store.DeleteProcess(context.WithoutCancel(ctx), id, p.Name)
}

// stopProcess ends a background process's whole tree and returns once
// nothing of it is left, so that a process started next finds its port
// free. SIGTERM goes to its main process, then, once that has ended, to
// what it left behind: a service run by /bin/sh -c is a shell and the
// server it started, which the shell's end does not end. Whatever is left
// after restartGrace is SIGKILLed. One that is not running is fine.
func (s *Service) stopProcess(ctx context.Context, r *core.Running, name string) error {
	deadline := time.Now().Add(restartGrace)
	var termedMain, termedLeft bool
	for time.Now().Before(deadline) {
		mainRuns, left, err := treeLeft(ctx, r, name)
		if errors.Is(err, errdefs.ErrInvalidArgument) {
			break // an agent from before signal 0 cannot tell what is left: kill it
		}
		if err != nil || !left {
			return err
		}
		switch {
		case mainRuns && !termedMain:
			termedMain = s.signalProcess(ctx, r, name, syscall.SIGTERM)
		case !mainRuns && !termedLeft:
			termedLeft = s.signalProcess(ctx, r, name, syscall.SIGTERM)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.signalProcess(ctx, r, name, syscall.SIGKILL) // returns once what is left is dead
	return nil
}

// treeLeft tells what is left of a background process's tree: whether its
// main process runs, and whether anything of it does.
func treeLeft(ctx context.Context, r *core.Running, name string) (mainRuns, left bool, err error) {
	running, err := processes.Running(ctx, r)
	if err != nil {
		return false, false, err
	}
	if _, ok := running[name]; ok {
		return true, true, nil
	}
	err = sendSignal(ctx, r, name, 0)
	if errors.Is(err, errdefs.ErrNotFound) {
		return false, false, nil
	}
	return false, err == nil, err
}

// signalProcess signals a background process by its tag and reports
// whether it was running.
func (s *Service) signalProcess(ctx context.Context, r *core.Running, name string, sig syscall.Signal) bool {
	err := sendSignal(ctx, r, name, sig)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("signal process", attrSandbox, r.ID(), "process", name, "error", err)
	}
	return err == nil
}

// process finds a sandbox's background process by name and its sandbox,
// woken; the caller calls release when done with the agent.
func (s *Service) process(ctx context.Context, id, name string) (r *core.Running, release func(), p *store.Process, err error) {
	known, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	i := slices.IndexFunc(known, func(p *store.Process) bool { return p.Name == name })
	if i < 0 {
		if _, err := s.store.GetSandbox(ctx, id); err != nil {
			return nil, nil, nil, err
		}
		return nil, nil, nil, errdefs.NotFound("sandbox %s has no process %q", id, name)
	}
	r, release, err = s.core.Acquire(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	return r, release, known[i], nil
}
