package sandbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent"
	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/lifecycle"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/template"
)

// Background processes: commands started through the API that outlive the
// request (a dev server, a worker). The agent runs them under the tag
// processTag(name) and keeps their latest output (their logs); the store
// keeps how to start them, so that a resume starts again those that ran
// when the sandbox was suspended. A running one keeps its sandbox awake.
const (
	processTagPrefix = "hutch-process:"
	// processLogBytes is how much of a process's latest output is kept.
	processLogBytes = 1 << 20
	maxProcesses    = 32
	// restartGrace is how long a restart waits after SIGTERM before it
	// kills the process's tree.
	restartGrace = 5 * time.Second
)

var processName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func processTag(name string) string { return processTagPrefix + name }

// selectProcess selects background process name by its tag.
func selectProcess(name string) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: processTag(name)}}
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
func (m *Manager) StartProcess(ctx context.Context, id string, req ProcessRequest) (ProcessInfo, error) {
	argv, err := ExecRequest{Cmd: req.Cmd, Command: req.Command}.argv()
	if err != nil {
		return ProcessInfo{}, err
	}
	if req.Name == "" {
		req.Name = defaultProcessName(argv)
	}
	if !processName.MatchString(req.Name) {
		return ProcessInfo{}, errdefs.InvalidArgument("process name %q must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
	}
	if req.Port < 0 || req.Port > 65535 {
		return ProcessInfo{}, errdefs.InvalidArgument("port must be between 1 and 65535, got %d", req.Port)
	}
	for k := range req.Env {
		if !template.ValidEnvName(k) {
			return ProcessInfo{}, errdefs.InvalidArgument("env name %q is not a valid variable name", k)
		}
	}
	inst, release, err := m.acquire(ctx, id)
	if err != nil {
		return ProcessInfo{}, err
	}
	defer release()
	known, err := m.store.ListProcesses(ctx, id)
	if err != nil {
		return ProcessInfo{}, err
	}
	i := slices.IndexFunc(known, func(p *store.Process) bool { return p.Name == req.Name })
	if i < 0 && len(known) >= maxProcesses {
		return ProcessInfo{}, errdefs.ResourceExhausted("sandbox %s has %d processes, the most it may have: delete one first", id, len(known))
	}
	p := &store.Process{
		SandboxID: id, Name: req.Name, Argv: argv, Cwd: req.Cwd, User: req.User,
		Env: req.Env, Port: req.Port, Running: true, CreatedAt: time.Now().UTC(),
	}
	pid, err := m.startProcess(ctx, inst, p)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return ProcessInfo{}, errdefs.Conflict("process %q runs already in sandbox %s: restart it, or delete it first", req.Name, id)
	}
	if err != nil {
		return ProcessInfo{}, err
	}
	if err := m.store.PutProcess(context.WithoutCancel(ctx), p); err != nil {
		m.signalProcess(context.WithoutCancel(ctx), inst, p.Name, process.Signal_SIGNAL_SIGKILL)
		return ProcessInfo{}, err
	}
	m.log.Info("process started", attrSandbox, id, "process", p.Name, "pid", pid)
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
	return fmt.Sprintf("%.40s-%s", base, newID()[:6])
}

// startProcess starts p in the sandbox's agent and returns its pid once it
// runs; the process outlives the request that starts it.
func (m *Manager) startProcess(ctx context.Context, inst *instance, p *store.Process) (uint32, error) {
	cwd := template.Workspace
	if p.Cwd != "" {
		cwd = workspacePath(p.Cwd)
	}
	tag := processTag(p.Name)
	noStdin := false
	start := connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: p.Argv[0], Args: p.Argv[1:], Envs: withEnv(inst.env, p.Env), Cwd: &cwd},
		Stdin:   &noStdin,
		Tag:     &tag,
	})
	agentclient.WithUser(start, userOr(p.User))
	start.Header().Set(agent.HeaderKeepOutput, fmt.Sprint(processLogBytes))
	// Only the start event is read: leaving the stream does not stop the
	// process (envd's semantics).
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := inst.agent.Process.Start(sctx, start)
	if err != nil {
		return 0, err
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		if s := stream.Msg().GetEvent().GetStart(); s != nil {
			return s.GetPid(), nil
		}
	}
	if err := stream.Err(); err != nil {
		return 0, err
	}
	return 0, errdefs.Unavailable("the agent of sandbox %s did not report the start of process %q", inst.id, p.Name)
}

// runningProcesses asks a live sandbox's agent which background processes
// run: their pids by name.
func (m *Manager) runningProcesses(ctx context.Context, inst *instance) (map[string]uint32, error) {
	resp, err := inst.agent.Process.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		return nil, err
	}
	running := map[string]uint32{}
	for _, p := range resp.Msg.GetProcesses() {
		if name, ok := strings.CutPrefix(p.GetTag(), processTagPrefix); ok {
			running[name] = p.GetPid()
		}
	}
	return running, nil
}

// ListProcesses lists a sandbox's background processes. It does not wake a
// suspended sandbox: its processes show as suspended (those a resume
// starts again) or exited.
func (m *Manager) ListProcesses(ctx context.Context, id string) ([]ProcessInfo, error) {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	known, err := m.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	var running map[string]uint32
	if inst != nil && !inst.isPaused() {
		if running, err = m.runningProcesses(ctx, inst); err != nil {
			return nil, err
		}
	}
	out := make([]ProcessInfo, 0, len(known))
	for _, p := range known {
		status := ProcessExited
		pid, ok := running[p.Name]
		switch {
		case ok:
			status = ProcessRunning
		case running == nil && p.Running && rec.State == lifecycle.Paused:
			status = ProcessRunning // frozen with its sandbox
		case running == nil && p.Running:
			status = ProcessSuspended
		}
		out = append(out, processInfo(p, status, pid))
	}
	return out, nil
}

// ProcessLogs sends a background process's kept output (its latest 1 MiB)
// to out and, with follow, what it writes next until it exits or ctx ends.
// It wakes a suspended sandbox; after a resume under runc the logs start
// with the process's new run.
func (m *Manager) ProcessLogs(ctx context.Context, id, name string, follow bool, out Output) error {
	inst, release, p, err := m.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	req := connect.NewRequest(&process.ConnectRequest{Process: selectProcess(p.Name)})
	mode := agent.ReplayTail
	if follow {
		mode = agent.ReplayFollow
	}
	req.Header().Set(agent.HeaderReplay, mode)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := inst.agent.Process.Connect(sctx, req)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // not started since the agent started: no logs yet
	}
	if err != nil {
		return err
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if follow {
			inst.touch(m.clock.Now()) // someone is watching
		}
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Data:
			if err := deliver(out, e.Data); err != nil {
				return err
			}
		case *process.ProcessEvent_End:
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return stream.Err()
}

// SignalProcess sends a signal to a background process: SIGKILL kills its
// whole tree, the others (HUP, INT, QUIT, USR1, USR2, TERM) go to its main
// process.
func (m *Manager) SignalProcess(ctx context.Context, id, name, signal string) error {
	sig, err := parseSignal(signal)
	if err != nil {
		return err
	}
	inst, release, p, err := m.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	err = sendSignal(ctx, inst, p.Name, sig)
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.FailedPrecondition("process %q of sandbox %s is not running", name, id)
	}
	return err
}

// sendSignal signals a background process by its tag; ErrNotFound when it
// is not running.
func sendSignal(ctx context.Context, inst *instance, name string, sig process.Signal) error {
	_, err := inst.agent.Process.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: selectProcess(name), Signal: sig}))
	return err
}

// parseSignal reads a signal's name, with or without SIG.
func parseSignal(name string) (process.Signal, error) {
	if sig, ok := processSignals[strings.TrimPrefix(strings.ToUpper(name), "SIG")]; ok {
		return sig, nil
	}
	return 0, errdefs.InvalidArgument("signal must be one of HUP, INT, QUIT, KILL, USR1, USR2, TERM; got %q", name)
}

// processSignals are the signals a background process may be sent. envd's
// enum names only TERM and KILL, but its values are signal numbers.
var processSignals = map[string]process.Signal{
	"HUP": 1, "INT": 2, "QUIT": 3, "KILL": process.Signal_SIGNAL_SIGKILL,
	"USR1": 10, "USR2": 12, "TERM": process.Signal_SIGNAL_SIGTERM,
}

// RestartProcess stops a background process (SIGTERM, then after 5 s
// SIGKILL to its tree) if it runs, and starts it again with the same
// command and env.
func (m *Manager) RestartProcess(ctx context.Context, id, name string) (ProcessInfo, error) {
	inst, release, p, err := m.process(ctx, id, name)
	if err != nil {
		return ProcessInfo{}, err
	}
	defer release()
	if err := m.stopProcess(ctx, inst, p.Name); err != nil {
		return ProcessInfo{}, err
	}
	pid, err := m.startProcess(ctx, inst, p)
	if err != nil {
		return ProcessInfo{}, err
	}
	p.Running = true
	if err := m.store.PutProcess(context.WithoutCancel(ctx), p); err != nil {
		return ProcessInfo{}, err
	}
	m.log.Info("process restarted", attrSandbox, id, "process", p.Name, "pid", pid)
	return processInfo(p, ProcessRunning, pid), nil
}

// DeleteProcess kills a background process's tree and forgets it.
func (m *Manager) DeleteProcess(ctx context.Context, id, name string) error {
	inst, release, p, err := m.process(ctx, id, name)
	if err != nil {
		return err
	}
	defer release()
	m.signalProcess(ctx, inst, p.Name, process.Signal_SIGNAL_SIGKILL)
	return m.store.DeleteProcess(context.WithoutCancel(ctx), id, p.Name)
}

// stopProcess ends a background process: SIGTERM, and SIGKILL to its tree
// if it still runs after restartGrace. One that is not running is fine.
func (m *Manager) stopProcess(ctx context.Context, inst *instance, name string) error {
	deadline := time.Now().Add(restartGrace)
	sent := m.signalProcess(ctx, inst, name, process.Signal_SIGNAL_SIGTERM)
	for sent && time.Now().Before(deadline) {
		running, err := m.runningProcesses(ctx, inst)
		if err != nil {
			return err
		}
		if _, ok := running[name]; !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	m.signalProcess(ctx, inst, name, process.Signal_SIGNAL_SIGKILL)
	return nil
}

// signalProcess signals a background process by its tag and reports
// whether it was running.
func (m *Manager) signalProcess(ctx context.Context, inst *instance, name string, sig process.Signal) bool {
	err := sendSignal(ctx, inst, name, sig)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("signal process", attrSandbox, inst.id, "process", name, "error", err)
	}
	return err == nil
}

// process finds a sandbox's background process by name and its sandbox,
// woken; the caller calls release when done with the agent.
func (m *Manager) process(ctx context.Context, id, name string) (inst *instance, release func(), p *store.Process, err error) {
	known, err := m.store.ListProcesses(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	i := slices.IndexFunc(known, func(p *store.Process) bool { return p.Name == name })
	if i < 0 {
		if _, err := m.store.GetSandbox(ctx, id); err != nil {
			return nil, nil, nil, err
		}
		return nil, nil, nil, errdefs.NotFound("sandbox %s has no process %q", id, name)
	}
	inst, release, err = m.acquire(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	return inst, release, known[i], nil
}

// noteRunningProcesses records which background processes run, before a
// suspend ends them: those a resume starts again. When the agent cannot
// say, the records stay as they were.
func (m *Manager) noteRunningProcesses(ctx context.Context, inst *instance) {
	known, err := m.store.ListProcesses(ctx, inst.id)
	if err != nil || len(known) == 0 {
		return
	}
	running, err := m.runningProcesses(ctx, inst)
	if err != nil {
		m.log.Warn("list processes before suspend", attrSandbox, inst.id, "error", err)
		return
	}
	for _, p := range known {
		if _, ok := running[p.Name]; ok != p.Running {
			p.Running = ok
			if err := m.store.PutProcess(ctx, p); err != nil {
				m.log.Warn("record process", attrSandbox, inst.id, "process", p.Name, "error", err)
			}
		}
	}
}

// restartProcesses starts again, after a resume, the background processes
// that ran when the sandbox was suspended and do not run now (a restored
// checkpoint keeps them running). One that fails to start is logged and
// marked not running; the sandbox is up regardless.
func (m *Manager) restartProcesses(ctx context.Context, inst *instance) {
	known, err := m.store.ListProcesses(ctx, inst.id)
	if err != nil || len(known) == 0 {
		if err != nil {
			m.log.Error("list processes to restart", attrSandbox, inst.id, "error", err)
		}
		return
	}
	running, err := m.runningProcesses(ctx, inst)
	if err != nil {
		m.log.Error("list running processes after resume", attrSandbox, inst.id, "error", err)
		return
	}
	for _, p := range known {
		if _, ok := running[p.Name]; ok || !p.Running {
			continue
		}
		pid, err := m.startProcess(ctx, inst, p)
		if err != nil {
			m.log.Warn("restart process after resume", attrSandbox, inst.id, "process", p.Name, "error", err)
			p.Running = false
			if err := m.store.PutProcess(ctx, p); err != nil {
				m.log.Warn("record process", attrSandbox, inst.id, "process", p.Name, "error", err)
			}
			continue
		}
		m.log.Info("process restarted after resume", attrSandbox, inst.id, "process", p.Name, "pid", pid)
	}
}
