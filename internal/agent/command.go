package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
)

const (
	// readChunk is the most output one DataEvent carries.
	readChunk = 32 << 10
	// eofWait is how long the end of a command waits for its stdout and
	// stderr to reach EOF once the command exited: background processes
	// holding the pipes must not keep the stream open.
	eofWait = 50 * time.Millisecond
	// killTimeout bounds one SIGKILL sweep of a process tree.
	killTimeout = 5 * time.Second
	// startTimeout bounds how long a shim may take to start its command.
	startTimeout = 10 * time.Second
)

type commandState int

const (
	stateRunning   commandState = iota // the main command runs
	stateLingering                     // it ended; processes it left behind still run under the shim
	stateGone                          // the shim exited: nothing is left
)

// command is one process the agent started, from Start until its shim
// exits. The shim outlives the main command while processes it left behind
// run; the command record lives as long, so they can still be killed.
//
// Output after the main command ended (written by processes it left behind)
// is read and discarded: the streams have ended with the EndEvent and Connect
// only attaches to running commands. Reading on keeps those processes from
// blocking or dying of SIGPIPE.
type command struct {
	svc     *processService
	config  *process.ProcessConfig
	tag     *string
	pid     uint32 // the main command
	shimPid int
	out     *output
	gone    chan struct{} // closed when the shim exited and was reaped

	stdinMu     sync.Mutex // serialises writes
	stdin       *os.File   // nil when started without stdin
	stdinClosed atomic.Bool

	mu       sync.Mutex
	state    commandState
	timedOut bool
	timers   []*time.Timer

	// killMu is held shared while a tree is being killed and exclusively to
	// mark the shim reaped, so its pid (the root of the tree walk) cannot be
	// reused while a kill walks /proc.
	killMu   sync.RWMutex
	shimDead bool
}

// spawnSpec is what Start asks for, resolved.
type spawnSpec struct {
	acct  account
	cmd   string
	args  []string
	dir   string
	env   []string
	stdin bool
}

// spawn starts a command under a new shim. On success the command is
// running and its pumps and supervisor are not yet started: the caller
// subscribes first, then calls run.
func (p *processService) spawn(spec spawnSpec) (c *command, stdout, stderr *os.File, ctl *bufio.Reader, err error) {
	var closers []*os.File
	defer func() {
		if err != nil {
			for _, f := range closers {
				_ = f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		closers = append(closers, r, w)
		return r, w
	}
	var stdinR, stdinW *os.File
	if spec.stdin {
		stdinR, stdinW = pipe()
	} else if stdinR, err = os.Open(os.DevNull); err == nil {
		closers = append(closers, stdinR)
	}
	stdoutR, stdoutW := pipe()
	stderrR, stderrW := pipe()
	if err != nil {
		return nil, nil, nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("create pipes: %w", err))
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("create control socket: %w", err))
	}
	_ = syscall.SetNonblock(fds[0], true)
	ctlAgent := os.NewFile(uintptr(fds[0]), "shim-control")
	ctlShim := os.NewFile(uintptr(fds[1]), "shim-control")
	closers = append(closers, ctlAgent, ctlShim)

	shim := p.srv.cfg.Shim
	argv := make([]string, 0, len(shim)+8+len(spec.args))
	argv = append(argv, shim...)
	argv = append(argv,
		"-uid", strconv.FormatUint(uint64(spec.acct.UID), 10),
		"-gid", strconv.FormatUint(uint64(spec.acct.GID), 10),
		"-dir", spec.dir, "--", spec.cmd)
	argv = append(argv, spec.args...)
	shimPid, err := p.srv.reaper.spawn(argv[0], argv, &syscall.ProcAttr{
		Env:   spec.env,
		Files: []uintptr{stdinR.Fd(), stdoutW.Fd(), stderrW.Fd(), ctlShim.Fd()},
		// Its own process group: `kill 0` in a command cannot reach the agent.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	// The shim has its copies; keeping ours would hold the pipes open.
	for _, f := range []*os.File{stdinR, stdoutW, stderrW, ctlShim} {
		_ = f.Close()
	}
	closers = []*os.File{stdinW, stdoutR, stderrR, ctlAgent}
	if err != nil {
		return nil, nil, nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("start shim %s: %w", shim[0], err))
	}

	c = &command{
		svc:     p,
		shimPid: shimPid,
		stdin:   stdinW,
		out:     newOutput(),
		gone:    make(chan struct{}),
	}
	ctl = bufio.NewReader(ctlAgent)
	_ = ctlAgent.SetReadDeadline(time.Now().Add(startTimeout))
	line, rerr := ctl.ReadString('\n')
	_ = ctlAgent.SetReadDeadline(time.Time{})
	line = strings.TrimSuffix(line, "\n")
	switch {
	case strings.HasPrefix(line, "pid "):
		pid, perr := strconv.ParseUint(line[len("pid "):], 10, 32)
		if perr == nil {
			c.pid = uint32(pid)
			return c, stdoutR, stderrR, ctl, nil
		}
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("shim: bad message %q", line))
	case strings.HasPrefix(line, "error "):
		err = connect.NewError(connect.CodeInvalidArgument, errors.New(line[len("error "):]))
	default:
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("shim exited before starting %s (%v)", spec.cmd, rerr))
	}
	// The shim exits on its own after an error; reap it. Killing it covers
	// a shim that misbehaves.
	_ = syscall.Kill(shimPid, syscall.SIGKILL)
	c.reapShim()
	return nil, nil, nil, nil, err
}

// run starts reading the command's output and control socket.
func (c *command) run(stdout, stderr *os.File, ctl *bufio.Reader) {
	stdoutDone := make(chan struct{})
	stderrDone := make(chan struct{})
	go c.pump(stdout, false, stdoutDone)
	go c.pump(stderr, true, stderrDone)
	go c.supervise(ctl, stdoutDone, stderrDone)
}

// pump reads one output pipe until EOF, publishing what it reads.
func (c *command) pump(f *os.File, stderr bool, done chan<- struct{}) {
	defer close(done)
	defer f.Close()
	buf := make([]byte, readChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			data := bytes.Clone(buf[:n])
			var ev process.ProcessEvent_DataEvent
			if stderr {
				ev.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: data}
			} else {
				ev.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: data}
			}
			c.out.publish(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &ev}})
		}
		if err != nil {
			return
		}
	}
}

// supervise follows the shim's control messages: it ends the output when
// the main command exits and reaps the shim when it closes the socket.
func (c *command) supervise(ctl *bufio.Reader, stdoutDone, stderrDone <-chan struct{}) {
	ended := false
	for {
		line, err := ctl.ReadString('\n')
		if err != nil {
			break
		}
		if rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "exit "); ok && !ended {
			ws, perr := strconv.ParseUint(rest, 10, 32)
			if perr != nil {
				continue
			}
			ended = true
			c.mainExited(endEvent(syscall.WaitStatus(ws)), stdoutDone, stderrDone)
		}
	}
	if !ended {
		c.mainExited(&process.ProcessEvent_EndEvent{ExitCode: -1, Status: "lost: the shim exited without reporting"}, stdoutDone, stderrDone)
	}
	c.reapShim()
	c.finish()
}

func (c *command) mainExited(end *process.ProcessEvent_EndEvent, stdoutDone, stderrDone <-chan struct{}) {
	c.mu.Lock()
	c.state = stateLingering
	timedOut := c.timedOut
	c.mu.Unlock()
	c.closeStdin()
	if timedOut {
		errTimeout := "timeout"
		end.Error = &errTimeout
		// The timeout kills the whole tree, also what survived the SIGTERM.
		go c.kill()
	}
	eof := time.NewTimer(eofWait)
	defer eof.Stop()
	for _, done := range []<-chan struct{}{stdoutDone, stderrDone} {
		select {
		case <-done:
		case <-eof.C:
		}
	}
	c.out.end(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}})
}

// endEvent describes a wait status the way Go's os.ProcessState.String does.
func endEvent(ws syscall.WaitStatus) *process.ProcessEvent_EndEvent {
	switch {
	case ws.Exited():
		return &process.ProcessEvent_EndEvent{
			ExitCode: int32(ws.ExitStatus()),
			Exited:   true,
			Status:   "exit status " + strconv.Itoa(ws.ExitStatus()),
		}
	case ws.Signaled():
		status := "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			status += " (core dumped)"
		}
		return &process.ProcessEvent_EndEvent{ExitCode: -1, Status: status}
	default:
		return &process.ProcessEvent_EndEvent{ExitCode: -1, Status: fmt.Sprintf("wait status %#x", uint32(ws))}
	}
}

// reapShim waits for the shim to exit, marks it dead, then reaps it: between
// the two, its pid stays reserved, so a kill in progress cannot hit a reused
// pid.
func (c *command) reapShim() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, c.shimPid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	c.killMu.Lock()
	c.shimDead = true
	c.killMu.Unlock()
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(c.shimPid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	c.svc.srv.reaper.forget(c.shimPid)
}

// finish drops the command once nothing of it is left.
func (c *command) finish() {
	c.mu.Lock()
	c.state = stateGone
	for _, t := range c.timers {
		t.Stop()
	}
	c.mu.Unlock()
	c.svc.remove(c)
	close(c.gone)
}

// kill SIGKILLs the main command and every process under the shim.
func (c *command) kill() {
	c.killMu.RLock()
	defer c.killMu.RUnlock()
	if c.shimDead {
		return
	}
	if err := killDescendants(c.shimPid, killTimeout); err != nil {
		c.svc.srv.log.Warn("kill process tree", logPID, c.pid, logError, err)
	}
}

// signalMain sends sig to the main command if it still runs. It reports
// whether it did.
func (c *command) signalMain(sig syscall.Signal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateRunning {
		return false
	}
	_ = syscall.Kill(int(c.pid), sig)
	return true
}

func (c *command) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateRunning
}

// setTimeout makes the command end at the deadline: SIGTERM to the main
// command, then after grace SIGKILL to the whole tree; grace 0 kills the
// tree at once. A command that already ended by then has its leftovers
// killed: a timeout bounds the whole tree.
func (c *command) setTimeout(timeout, grace time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, time.AfterFunc(timeout, func() {
		c.mu.Lock()
		if c.state == stateGone {
			c.mu.Unlock()
			return
		}
		running := c.state == stateRunning
		if running {
			c.timedOut = true
		}
		c.mu.Unlock()
		if !running || grace == 0 || !c.signalMain(syscall.SIGTERM) {
			c.kill()
			return
		}
		c.mu.Lock()
		if c.state != stateGone {
			c.timers = append(c.timers, time.AfterFunc(grace, c.kill))
		}
		c.mu.Unlock()
	}))
}

// writeStdin writes data to the command's stdin, giving up when ctx ends.
func (c *command) writeStdin(ctx context.Context, data []byte) error {
	if c.stdin == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d was started without stdin", c.pid))
	}
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdinClosed.Load() {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("stdin of process %d is closed", c.pid))
	}
	_ = c.stdin.SetWriteDeadline(time.Time{})
	wrote := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case <-ctx.Done():
			_ = c.stdin.SetWriteDeadline(time.Now())
		case <-wrote:
		}
	})
	_, err := c.stdin.Write(data)
	close(wrote)
	watcher.Wait()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	case c.stdinClosed.Load(), errors.Is(err, os.ErrClosed):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("stdin of process %d is closed", c.pid))
	case errors.Is(err, syscall.EPIPE):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d does not read its stdin any more", c.pid))
	default:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("write stdin of process %d: %w", c.pid, err))
	}
}

// closeStdin signals EOF on the command's stdin. A write blocked on a full
// pipe fails.
func (c *command) closeStdin() {
	if c.stdin != nil && c.stdinClosed.CompareAndSwap(false, true) {
		_ = c.stdin.Close()
	}
}
