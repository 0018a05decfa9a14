package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
)

const (
	defaultKillGrace = 2 * time.Second
	maxKeepOutput    = 4 << 20
	// maxKept bounds how many tags' output is kept; the oldest Start's goes.
	maxKept = 64
)

// processService implements envd's process.Process. Hutch's own service
// (agentService) starts, replays and signals commands through it too, so
// that both see the same commands.
type processService struct {
	processconnect.UnimplementedProcessHandler
	srv *server

	mu       sync.Mutex
	cmds     map[*command]struct{}
	starting map[string]struct{} // tags of Starts in progress
	closed   bool                // shutting down: commands still being added are killed
	kept     map[string]*command // by tag: the latest with output kept (startRequest.keep)
	keptTags []string            // those tags, oldest Start first
}

var _ processconnect.ProcessHandler = (*processService)(nil)

func newProcessService(srv *server) *processService {
	return &processService{srv: srv, cmds: map[*command]struct{}{}, starting: map[string]struct{}{}, kept: map[string]*command{}}
}

// Start starts a command as envd does. With pty, the command gets a new
// terminal of that size (see openTerminal), and TERM is xterm-256color
// unless its envs say otherwise. Hutch adds one thing envd refuses: with
// no cmd, the command is the user's login shell, started as a login shell
// (argv[0] "-bash") when it has no args either, else given them (-c CMD).
// The stream's Connect-Timeout-Ms is the command's lifetime (see
// processLifetime).
func (p *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	msg := req.Msg
	acct, err := p.srv.requestUser(req.Header(), "")
	if err != nil {
		return err
	}
	lifetime, err := processLifetime(req.Header())
	if err != nil {
		return err
	}
	start := startRequest{
		acct:    acct,
		config:  msg.GetProcess(),
		tag:     msg.Tag,
		stdin:   msg.Stdin == nil || *msg.Stdin,
		timeout: lifetime,
		grace:   0, // SIGKILL at the deadline, as envd
	}
	if msg.Pty != nil {
		if start.tty, err = terminalSize(msg.GetPty().GetSize()); err != nil {
			return err
		}
	}
	return p.start(ctx, start, func(_ *command, ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

// badDir is the error of a command that did not start: its working
// directory's, when that is what is wrong. It is looked at only then: a
// stat under gVisor costs ~0.15 ms here, which every command would pay.
func badDir(dir string, err error) error {
	if fi, serr := os.Stat(dir); serr != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("working directory %s: %w", dir, unwrapPathError(serr)))
	} else if !fi.IsDir() {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("working directory %s is not a directory", dir))
	}
	return err
}

// processLifetime is how long envd's Start lets its command live: the
// stream's Connect-Timeout-Ms, 0 (no limit) when absent or 0. envd makes
// the header the command's lifetime and SIGKILLs the command at the deadline
// (its start.go runs the command under context.WithTimeout), and E2B's SDKs
// rely on that: their timeoutMs, 60 s unless set, bounds the command, not
// only the stream. connect-go ends the stream at the same deadline; a client
// that goes away before it still does not end the command.
func processLifetime(h http.Header) (time.Duration, error) {
	v := h.Get(connectTimeoutHeader)
	if v == "" {
		return 0, nil
	}
	// connect-go has refused a malformed value before the handler runs.
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || len(v) > 10 {
		return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %q is not a count of milliseconds", connectTimeoutHeader, v))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// connectTimeoutHeader is the Connect protocol's request timeout.
const connectTimeoutHeader = "Connect-Timeout-Ms"

// startRequest is a Start of either service (envd's or Hutch's), its user
// resolved.
type startRequest struct {
	acct   account
	config *process.ProcessConfig // cwd relative to acct's home; what List reports
	tag    *string
	stdin  bool          // a pipe the command's stdin reads, else /dev/null
	tty    *unix.Winsize // a terminal of this size for its stdio instead (see openTerminal)
	input  []byte        // when not nil, written to that pipe, which is then closed
	// stdinOpen keeps the pipe open after input, for SendInput and
	// CloseStdin.
	stdinOpen bool
	// timeout, when not 0, ends the command (see command.setTimeout).
	timeout, grace time.Duration
	keep           int // bytes of output to keep for Replay
}

// sendFunc sends one of c's events to a stream, in its service's shape.
type sendFunc func(c *command, ev *process.ProcessEvent) error

// start starts what r asks for and streams its events to send until it
// ends or ctx is done; the client going away does not stop the command
// (envd's semantics).
func (p *processService) start(ctx context.Context, r startRequest, send sendFunc) error {
	pc := r.config
	if err := checkEnv(pc.GetEnvs()); err != nil {
		return err
	}
	pc, argv0 := withLoginShell(pc, r.acct)
	envs := pc.GetEnvs()
	if _, ok := envs["TERM"]; r.tty != nil && !ok {
		envs = maps.Clone(envs)
		if envs == nil {
			envs = map[string]string{}
		}
		envs["TERM"] = defaultTerm
	}
	if r.keep < 0 || r.keep > maxKeepOutput {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the output kept must be a byte count up to %d, got %d", maxKeepOutput, r.keep))
	}
	if r.keep > 0 && r.tag == nil {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("keeping output needs a tag to find it by"))
	}
	dir, err := resolvePath(pc.GetCwd(), r.acct)
	if err != nil {
		return err
	}

	tag := r.tag
	if tag != nil {
		if err := p.reserveTag(*tag); err != nil {
			return err
		}
	}
	c, outputs, err := p.spawn(spawnSpec{
		acct:  r.acct,
		cmd:   pc.GetCmd(),
		args:  pc.GetArgs(),
		argv0: argv0,
		dir:   dir,
		env:   p.srv.processEnv(r.acct, envs),
		stdin: r.stdin,
		tty:   r.tty,
		keep:  r.keep,
	})
	if err != nil {
		if tag != nil {
			p.releaseTag(*tag)
		}
		return badDir(dir, err)
	}
	c.config, c.tag = pc, tag
	sub, _ := c.out.subscribe()
	p.add(c)
	if r.keep > 0 {
		p.keep(*tag, c)
	}
	if r.timeout > 0 {
		c.setTimeout(r.timeout, r.grace)
	}
	c.run(outputs)
	switch {
	case r.stdin && r.input != nil && r.stdinOpen:
		go func() { _ = c.writeStdin(context.Background(), r.input) }() // a failed write shows in what the command does
	case r.stdin && r.input != nil:
		go c.feedStdin(r.input)
	}
	p.srv.log.Debug("started process", logPID, c.pid, logSupervisor, c.tree, logUser, r.acct.Name)
	return p.follow(ctx, c, nil, sub, send)
}

func (p *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	c, err := p.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub, ok := c.out.subscribe()
	if !ok {
		return notFound(req.Msg.GetProcess())
	}
	return p.follow(ctx, c, nil, sub, func(_ *command, ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

// replay sends the output kept for tag (see startRequest.keep): a
// StartEvent, what was kept, then, with follow, the command's output until
// its end; without, its EndEvent if it has ended.
func (p *processService) replay(ctx context.Context, tag string, follow bool, send sendFunc) error {
	c, err := p.findKept(tag)
	if err != nil {
		return err
	}
	kept, sub := c.out.replay(follow)
	return p.follow(ctx, c, kept, sub, send)
}

// follow sends a StartEvent, the kept events, then the command's output and
// EndEvent, with keepalives when it stays silent, until the end or until
// ctx is done. With a nil sub only the EndEvent, if the command has ended,
// follows what was kept.
func (p *processService) follow(ctx context.Context, c *command, kept []*process.ProcessEvent, sub *subscriber, send sendFunc) error {
	if sub != nil {
		defer c.out.unsubscribe(sub)
	}
	if err := send(c, &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: c.pid}}}); err != nil {
		return err
	}
	for _, ev := range kept {
		if err := send(c, ev); err != nil {
			return err
		}
	}
	if sub == nil {
		if end := c.out.finalEvent(); end != nil {
			lastWrites(ctx)
			return send(c, end)
		}
		return nil
	}
	keepAlive := time.NewTimer(p.srv.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var ev *process.ProcessEvent
		last := false
		select {
		case ev = <-sub.ch:
		case <-c.out.done:
			select {
			case ev = <-sub.ch:
			default:
				ev, last = c.out.endEvent, true
				lastWrites(ctx)
			}
		case <-keepAlive.C:
			ev = &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := send(c, ev); err != nil {
			return err
		}
		if last {
			return nil
		}
		keepAlive.Reset(p.srv.cfg.KeepAlive)
	}
}

func (p *processService) List(_ context.Context, _ *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	p.mu.Lock()
	var infos []*process.ProcessInfo
	for c := range p.cmds {
		if c.running() {
			infos = append(infos, &process.ProcessInfo{Config: c.config, Pid: c.pid, Tag: c.tag})
		}
	}
	p.mu.Unlock()
	slices.SortFunc(infos, func(a, b *process.ProcessInfo) int { return int(a.Pid) - int(b.Pid) })
	return connect.NewResponse(&process.ListResponse{Processes: infos}), nil
}

// Update sets the size of a running command's terminal.
func (p *processService) Update(_ context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	if req.Msg.GetPty().GetSize() == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an update gives the terminal's new size (pty.size)"))
	}
	size, err := terminalSize(req.Msg.GetPty().GetSize())
	if err != nil {
		return nil, err
	}
	c, err := p.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := c.resize(size); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

func (p *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	c, err := p.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(ctx, c, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (p *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var c *command
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			var err error
			if c, err = p.find(ev.Start.GetProcess()); err != nil {
				return nil, err
			}
		case *process.StreamInputRequest_Data:
			if c == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("stream input must begin with a start event naming the process"))
			}
			if err := writeInput(ctx, c, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (p *processService) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	c, err := p.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	c.closeStdin()
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal signals a command as signal does. envd names SIGTERM and
// SIGKILL; its enum holds signal numbers, so the others signal takes come
// through too.
func (p *processService) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	if err := p.signal(req.Msg.GetProcess(), syscall.Signal(req.Msg.GetSignal())); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// signal sends SIGTERM and the other mainSignals to the main command only;
// SIGKILL kills the main command and every process of its tree, and
// returns once they are dead. When no running command matches, SIGKILL and
// SIGTERM reach every process that the commands with that pid or tag left
// behind when their main process ended: the server a shell started keeps
// running when a SIGTERM ends the shell, and a second SIGTERM asks it to
// end too. Signal 0, as kill(2)'s, sends nothing: not found tells that
// nothing of such a command is left.
func (p *processService) signal(sel *process.ProcessSelector, sig syscall.Signal) error {
	if sig != 0 && sig != syscall.SIGKILL && !slices.Contains(mainSignals, sig) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unsupported signal %d", sig))
	}
	cmds, err := p.findAll(sel, sig == 0 || sig == syscall.SIGKILL || sig == syscall.SIGTERM)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, c := range cmds {
		switch {
		case sig == 0: // found: that is all it asks
		case sig == syscall.SIGKILL:
			wg.Go(func() {
				c.kill()
				c.waitDropped()
			})
		case c.signalMain(sig): // its main process runs: it has it
		case sig == syscall.SIGTERM:
			c.signalLeftovers(sig)
		}
	}
	wg.Wait()
	return nil
}

// mainSignals are the signals SendSignal gives a command's main process;
// SIGKILL kills its whole tree.
var mainSignals = []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM}

// find returns the running command sel names.
func (p *processService) find(sel *process.ProcessSelector) (*command, error) {
	cmds, err := p.findAll(sel, false)
	if err != nil {
		return nil, err
	}
	return cmds[0], nil
}

// findAll returns the commands sel names: the running one, else, when
// lingering is set, every command whose main process ended but that left
// processes behind.
func (p *processService) findAll(sel *process.ProcessSelector, lingering bool) ([]*command, error) {
	var match func(*command) bool
	switch s := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		match = func(c *command) bool { return c.pid == s.Pid }
	case *process.ProcessSelector_Tag:
		match = func(c *command) bool { return c.tag != nil && *c.tag == s.Tag }
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a process selector (pid or tag) is required"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var left []*command
	for c := range p.cmds {
		if !match(c) {
			continue
		}
		c.mu.Lock()
		state := c.state
		c.mu.Unlock()
		switch {
		case state == stateRunning:
			return []*command{c}, nil
		case state == stateLingering && lingering:
			left = append(left, c)
		}
	}
	if len(left) == 0 {
		return nil, notFound(sel)
	}
	return left, nil
}

// keep makes c the command whose output tag's replays send.
func (p *processService) keep(tag string, c *command) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.kept[tag]; ok {
		p.keptTags = slices.DeleteFunc(p.keptTags, func(t string) bool { return t == tag })
	}
	p.kept[tag] = c
	p.keptTags = append(p.keptTags, tag)
	if len(p.keptTags) > maxKept {
		delete(p.kept, p.keptTags[0])
		p.keptTags = p.keptTags[1:]
	}
}

// findKept returns the latest command started with tag and its output
// kept, running or not.
func (p *processService) findKept(tag string) (*command, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.kept[tag]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no output is kept for tag %q", tag))
	}
	return c, nil
}

func notFound(sel *process.ProcessSelector) error {
	if s, ok := sel.GetSelector().(*process.ProcessSelector_Tag); ok {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", s.Tag))
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d not found", sel.GetPid()))
}

// reserveTag claims tag for a Start in progress; tags are unique among
// running commands.
func (p *processService) reserveTag(tag string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, taken := p.starting[tag]
	for c := range p.cmds {
		if c.tag != nil && *c.tag == tag && c.running() {
			taken = true
		}
	}
	if taken {
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a process with tag %q is already running", tag))
	}
	p.starting[tag] = struct{}{}
	return nil
}

func (p *processService) releaseTag(tag string) {
	p.mu.Lock()
	delete(p.starting, tag)
	p.mu.Unlock()
}

func (p *processService) add(c *command) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.tag != nil {
		delete(p.starting, *c.tag)
	}
	p.cmds[c] = struct{}{}
	if p.closed {
		go c.kill()
	}
}

func (p *processService) remove(c *command) {
	p.mu.Lock()
	delete(p.cmds, c)
	p.mu.Unlock()
}

// killAll kills every process tree, and those of commands still starting,
// and waits until ctx is done for them to be gone.
func (p *processService) killAll(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	cmds := make([]*command, 0, len(p.cmds))
	for c := range p.cmds {
		cmds = append(cmds, c)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cmds {
		wg.Go(c.kill)
	}
	wg.Wait()
	for _, c := range cmds {
		select {
		case <-c.gone:
		case <-ctx.Done():
			return
		}
	}
}

// withLoginShell is pc with the user's login shell for its cmd when it
// names none, and argv[0] for a login shell ("-sh") when it has no args
// either.
func withLoginShell(pc *process.ProcessConfig, acct account) (_ *process.ProcessConfig, argv0 string) {
	if pc.GetCmd() != "" {
		return pc, ""
	}
	shell := acct.loginShell()
	if len(pc.GetArgs()) == 0 {
		argv0 = "-" + filepath.Base(shell)
	}
	return &process.ProcessConfig{Cmd: shell, Args: pc.GetArgs(), Envs: pc.GetEnvs(), Cwd: pc.Cwd}, argv0
}

func checkEnv(envs map[string]string) error {
	for k, v := range envs {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid environment variable %q", k))
		}
	}
	return nil
}

// unwrapPathError returns the errno text of a *PathError, so that messages
// can name the path once.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
