package exec

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/events"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Services: a background process with a port is a service, what a
// preview pane shows. Beside a process's, a service has a status a pane
// can show: starting until its port accepts a connection, running,
// suspended with its sandbox (a resume starts it again), stopped (by
// request, or with its stopped sandbox), and error when it ended by
// itself, with its exit code and the end of its log. A service does not
// keep its sandbox awake by running; requests to its preview do.

// Service statuses.
const (
	ServiceStarting  = "starting"
	ServiceRunning   = "running"
	ServiceSuspended = "suspended"
	ServiceStopped   = "stopped"
	ServiceError     = "error"
)

// SlotPreview is the slot of a product's one preview pane: a service
// started in it replaces the one before, unless asked not to.
const SlotPreview = "preview"

const (
	// readyTimeout bounds how long a starting service's port is probed.
	readyTimeout = 2 * time.Minute
	readyPoll    = 100 * time.Millisecond
	// logTailLines is how much of a failed service's log its status tells.
	logTailLines = 20
	// endWait bounds how long a failed service's exit is awaited: its
	// process has ended, but the agent reads the rest of its output (and
	// only then knows the exit code) a moment later, or, when a child it
	// left behind holds its output open, not at all.
	endWait = 2 * time.Second
	// eventsPoll is how often an events stream looks at the status.
	eventsPoll = 250 * time.Millisecond
)

// ServiceRequest starts a service: a background process (Port required)
// with what a preview needs.
type ServiceRequest struct {
	ProcessRequest
	// Public: its preview answers without a key or a link.
	Public bool
	// Slot is the pane it fills ("" for none).
	Slot string
	// Replace stops and deletes the sandbox's other services of the same
	// slot first. Nil means true in the preview slot, false elsewhere.
	Replace *bool
}

// ServiceInfo describes a service.
type ServiceInfo struct {
	ProcessInfo // Status is one of the Service statuses
	Public      bool
	Slot        string
	// Since is when the status was first seen.
	Since time.Time
	// ExitCode and LogTail tell an error: how it ended, the end of its
	// output.
	ExitCode *int
	LogTail  string
	// LinksRevoked: its preview links made until then open nothing
	// (zero: none revoked).
	LinksRevoked time.Time
}

// serviceStates remembers what the store does not: when each service's
// status was first seen, whether its current run's port has accepted, and
// how a failed run ended.
type serviceStates struct {
	mu sync.Mutex
	m  map[string]*serviceState // by sandbox id + "/" + name
}

type serviceState struct {
	status  string
	since   time.Time
	pid     uint32 // the run the rest is about
	ready   bool   // its port has accepted a connection
	probing bool
	read    bool // how the ended run ended has been read
	exit    *int // its exit code, when known
	tail    string
}

// begin makes st about run pid, forgetting what was seen of the run
// before.
func (st *serviceState) begin(pid uint32) {
	st.pid, st.ready, st.read, st.exit, st.tail = pid, false, false, nil, ""
}

// StartService starts a service in sandbox id (waking it) and returns it,
// starting. With Replace, the sandbox's other services of its slot are
// stopped and deleted first.
func (s *Service) StartService(ctx context.Context, id string, req ServiceRequest) (ServiceInfo, error) {
	if req.Port < 1 || req.Port > 65535 {
		return ServiceInfo{}, errdefs.InvalidArgument("a service needs the port it listens on, between 1 and 65535; got %d", req.Port)
	}
	if len(req.Slot) > 63 || req.Slot != "" && !processName().MatchString(req.Slot) {
		return ServiceInfo{}, errdefs.InvalidArgument("slot %q must be 1 to 63 letters, digits, '.', '_' or '-'", req.Slot)
	}
	replace := req.Slot == SlotPreview
	if req.Replace != nil {
		replace = *req.Replace
	}
	if replace {
		if err := s.replaceServices(ctx, id, req.Name, req.Slot); err != nil {
			return ServiceInfo{}, err
		}
	}
	p, err := s.startProcess(ctx, id, req.ProcessRequest, &req)
	if err != nil {
		return ServiceInfo{}, err
	}
	return s.Service(ctx, id, p.Name)
}

// replaceServices deletes the sandbox's services of slot other than keep.
func (s *Service) replaceServices(ctx context.Context, id, keep, slot string) error {
	known, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return err
	}
	for _, p := range known {
		if p.Port > 0 && p.Slot == slot && p.Name != keep {
			if err := s.DeleteProcess(ctx, id, p.Name); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return err
			}
			s.log.Info("service replaced", attrSandbox, id, "service", p.Name)
		}
	}
	return nil
}

// Services lists a sandbox's services. Like ListProcesses, it neither
// wakes the sandbox nor counts as activity.
func (s *Service) Services(ctx context.Context, id string) ([]ServiceInfo, error) {
	rec, known, procs, err := s.processes(ctx, id)
	if err != nil {
		return nil, err
	}
	out := []ServiceInfo{}
	for i, pi := range procs {
		if pi.Port > 0 {
			out = append(out, s.serviceInfo(ctx, rec, known[i], pi))
		}
	}
	return out, nil
}

// Service returns one service of sandbox id.
func (s *Service) Service(ctx context.Context, id, name string) (ServiceInfo, error) {
	all, err := s.Services(ctx, id)
	if err != nil {
		return ServiceInfo{}, err
	}
	i := slices.IndexFunc(all, func(si ServiceInfo) bool { return si.Name == name })
	if i < 0 {
		return ServiceInfo{}, errdefs.NotFound("sandbox %s has no service %q", id, name)
	}
	return all[i], nil
}

// serviceInfo tells a service's status from its process's and its
// sandbox's, and from what was seen of its current run.
func (s *Service) serviceInfo(ctx context.Context, rec *store.Sandbox, p *store.Process, pi ProcessInfo) ServiceInfo {
	status := ServiceStopped
	switch {
	case pi.Status == ProcessRunning:
		status = ServiceStarting // running once its port accepted
	case pi.Status == ProcessSuspended && rec.State != store.Stopped:
		status = ServiceSuspended
	case pi.Status == ProcessExited && p.Running: // wanted, but ended by itself
		status = ServiceError
	}
	st, ended := s.state(rec.ID, p.Name, pi.Pid, status)
	if ended {
		exit, tail := s.howItEnded(ctx, rec.ID, p.Name)
		s.states.mu.Lock()
		st.exit, st.tail = exit, tail
		s.states.mu.Unlock()
	}
	s.states.mu.Lock()
	defer s.states.mu.Unlock()
	if status == ServiceStarting && st.ready {
		status = ServiceRunning
	}
	if status == ServiceStarting && !st.probing {
		st.probing = true
		go s.probe(context.WithoutCancel(ctx), rec, p.Name, p.Port, st)
	}
	if status != st.status {
		st.status, st.since = status, time.Now().UTC()
		s.statusEvent(rec, p, st)
	}
	info := ServiceInfo{ProcessInfo: pi, Public: p.Public, Slot: p.Slot, Since: st.since, LinksRevoked: p.LinksRevokedAt}
	info.Status = status
	if status == ServiceError {
		info.ExitCode, info.LogTail = st.exit, st.tail
	}
	return info
}

// statusEvent tells the events that service p of sandbox rec is now as
// st says. The caller holds s.states.mu.
func (s *Service) statusEvent(rec *store.Sandbox, p *store.Process, st *serviceState) {
	data := map[string]string{"service": p.Name, "status": st.status, "port": strconv.Itoa(p.Port)}
	ev := &store.Event{Time: st.since, Workspace: rec.Workspace, Sandbox: rec.ID, Type: events.ServiceStatus,
		Message: "service " + p.Name + " is " + st.status, Data: data}
	if st.status == ServiceError {
		ev.Reason = hook.CauseError
		if st.exit != nil {
			data["exit_code"] = strconv.Itoa(*st.exit)
			ev.Message += ": it ended with exit code " + strconv.Itoa(*st.exit)
		}
	}
	s.event(ev)
}

// state returns what is remembered of a service, its run now pid (0 when
// it does not run); ended says the caller is the first to see it failed,
// and is to read how it ended.
func (s *Service) state(id, name string, pid uint32, status string) (st *serviceState, ended bool) {
	s.states.mu.Lock()
	defer s.states.mu.Unlock()
	if s.states.m == nil {
		s.states.m = map[string]*serviceState{}
	}
	key := id + "/" + name
	st = s.states.m[key]
	if st == nil {
		st = &serviceState{}
		s.states.m[key] = st
	}
	if pid != 0 && pid != st.pid {
		st.begin(pid)
	}
	if status == ServiceError && !st.read {
		st.read = true
		return st, true
	}
	return st, false
}

// newRun forgets what was seen of process name's earlier runs: it has just
// been started as pid. A pid alone does not tell runs apart: one started
// again after a resume, in a new PID namespace, may get its old pid back,
// whose port was seen to accept.
func (s *Service) newRun(id, name string, pid uint32) {
	s.states.mu.Lock()
	defer s.states.mu.Unlock()
	if st := s.states.m[id+"/"+name]; st != nil {
		st.begin(pid)
	}
}

// probe connects to a starting service's port until it accepts, then
// marks the run ready; it gives up after readyTimeout, or when the run
// ends.
func (s *Service) probe(ctx context.Context, rec *store.Sandbox, name string, port int, st *serviceState) {
	id := rec.ID
	s.states.mu.Lock()
	pid := st.pid
	s.states.mu.Unlock()
	defer func() {
		s.states.mu.Lock()
		st.probing = false
		s.states.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for ctx.Err() == nil {
		if ok, done := s.portAccepts(ctx, id, name, port, pid); done {
			s.states.mu.Lock()
			if st.pid == pid {
				st.ready = ok
				if ok && st.status == ServiceStarting {
					st.status, st.since = ServiceRunning, time.Now().UTC()
					s.statusEvent(rec, &store.Process{Name: name, Port: port}, st)
				}
			}
			s.states.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(readyPoll):
		}
	}
}

// portAccepts tries the port once: ok when it accepts; done when there is
// no more to try (it accepted, or the run ended).
func (s *Service) portAccepts(ctx context.Context, id, name string, port int, pid uint32) (ok, done bool) {
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return false, true
	}
	defer release()
	running, err := processes.Running(ctx, r)
	if err != nil || running[name] != pid {
		return false, true
	}
	conn, err := r.Agent().DialPort(ctx, port)
	if err != nil {
		return false, false
	}
	_ = conn.Close()
	return true, true
}

// howItEnded reads the end of an ended service's kept output and its
// exit code; nil when they cannot be read (the agent restarted since, or
// the output stayed open past endWait).
func (s *Service) howItEnded(ctx context.Context, id, name string) (*int, string) {
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return nil, ""
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, endWait)
	defer cancel()
	logs, err := r.Agent().Replay(ctx, processes.Tag(name), true)
	if err != nil {
		return nil, ""
	}
	defer func() { _ = logs.Close() }()
	var out strings.Builder
	for {
		ev, err := logs.Recv()
		if errors.Is(err, io.EOF) || err != nil {
			return nil, lastLinesOf(out.String(), logTailLines)
		}
		if ev.Exit != nil {
			code := ev.Exit.Code
			return &code, lastLinesOf(out.String(), logTailLines)
		}
		out.Write(ev.Data)
	}
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// isService checks, in the store, that sandbox id has service name.
func (s *Service) isService(ctx context.Context, id, name string) error {
	known, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(known, func(p *store.Process) bool { return p.Name == name && p.Port > 0 }) {
		return nil
	}
	if _, err := s.store.GetSandbox(ctx, id); err != nil {
		return err
	}
	return errdefs.NotFound("sandbox %s has no service %q", id, name)
}

// StopService stops a service's whole tree (SIGTERM, then SIGKILL after
// 5 s; see stopProcess): it stays stopped, also across a resume, until
// restarted.
func (s *Service) StopService(ctx context.Context, id, name string) (ServiceInfo, error) {
	if err := s.isService(ctx, id, name); err != nil {
		return ServiceInfo{}, err
	}
	r, release, p, err := s.process(ctx, id, name)
	if err != nil {
		return ServiceInfo{}, err
	}
	defer release()
	if err := s.stopProcess(ctx, r, p.Name); err != nil {
		return ServiceInfo{}, err
	}
	p.Running = false
	if err := s.store.PutProcess(context.WithoutCancel(ctx), p); err != nil {
		return ServiceInfo{}, err
	}
	return s.Service(ctx, id, name)
}

// RestartService stops a service if it runs and starts it again with the
// same command and env: a reload that picks up edited code.
func (s *Service) RestartService(ctx context.Context, id, name string) (ServiceInfo, error) {
	if err := s.isService(ctx, id, name); err != nil {
		return ServiceInfo{}, err
	}
	if _, err := s.RestartProcess(ctx, id, name); err != nil {
		return ServiceInfo{}, err
	}
	return s.Service(ctx, id, name)
}

// DeleteService kills a service and forgets it.
func (s *Service) DeleteService(ctx context.Context, id, name string) error {
	if err := s.isService(ctx, id, name); err != nil {
		return err
	}
	if err := s.DeleteProcess(ctx, id, name); err != nil {
		return err
	}
	s.states.mu.Lock()
	delete(s.states.m, id+"/"+name)
	s.states.mu.Unlock()
	return nil
}

// PortStarting says whether a service on port of sandbox id is starting
// (its port has not accepted yet): a preview request the port refuses
// then waits for it (preview.Config.Starting). It neither wakes the
// sandbox nor counts as activity; a sandbox whose services are unknown has
// none starting.
func (s *Service) PortStarting(ctx context.Context, id string, port int) bool {
	all, err := s.Services(ctx, id)
	if err != nil {
		s.log.Debug("preview: the sandbox's services are unknown", attrSandbox, id, "error", err)
		return false
	}
	return ServiceStartingOn(all, port)
}

// ServiceStartingOn says whether one of services is starting on port.
func ServiceStartingOn(services []ServiceInfo, port int) bool {
	return slices.ContainsFunc(services, func(svc ServiceInfo) bool {
		return svc.Port == port && svc.Status == ServiceStarting
	})
}

// RevokeServiceLinks revokes the preview links made for a service until
// now: they open nothing from then on, also after a daemon restart; links
// made later do. It neither wakes the sandbox nor counts as activity.
func (s *Service) RevokeServiceLinks(ctx context.Context, id, name string) error {
	if err := s.isService(ctx, id, name); err != nil {
		return err
	}
	if err := s.store.SetLinksRevoked(ctx, id, name, time.Now().UTC()); err != nil {
		return err
	}
	s.log.Info("service links revoked", attrSandbox, id, "service", name)
	return nil
}

// ServiceEvents calls fn with the service as it is now, then each time
// its status (or its run) changes, until ctx ends or fn fails. It neither
// wakes the sandbox nor keeps it awake.
func (s *Service) ServiceEvents(ctx context.Context, id, name string, fn func(ServiceInfo) error) error {
	var last ServiceInfo
	first := true
	for {
		cur, err := s.Service(ctx, id, name)
		if err != nil {
			if !first && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if first || cur.Status != last.Status || cur.Pid != last.Pid {
			if err := fn(cur); err != nil {
				return err
			}
			first, last = false, cur
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(eventsPoll):
		}
	}
}

// PublicPort says whether port of sandbox id is a public service's: its
// preview answers anyone. It reads the store only, as every anonymous
// preview request asks it.
func (s *Service) PublicPort(ctx context.Context, id string, port int) (bool, error) {
	known, err := s.store.ListProcesses(ctx, id)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(known, func(p *store.Process) bool { return p.Port == port && p.Public }), nil
}
