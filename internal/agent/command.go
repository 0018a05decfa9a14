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
	stateGone                          // every process of the command is gone
)

// command is one process the agent started, from Start until every process
// of its tree is gone. Its shim outlives the main command while processes it
// left behind run; the command record lives as long, so they can still be
// killed. Then the shim serves another command, or exits.
//
// Output after the main command ended (written by processes it left behind)
// is read and discarded: the streams have ended with the EndEvent and Connect
// only attaches to running commands. Reading on keeps those processes from
// blocking or dying of SIGPIPE.
type command struct {
	svc    *processService
	config *process.ProcessConfig
	tag    *string
	pid    uint32 // the main command
	shim   *shimProc
	out    *output
	gone   chan struct{} // closed when every process of the command is gone

	stdinMu     sync.Mutex // serialises writes
	stdin       *os.File   // nil when started without stdin
	stdinClosed atomic.Bool

	mu       sync.Mutex
	state    commandState
	timedOut bool
	timers   []*time.Timer

	// killMu is held shared while the tree is being killed, exclusively to
	// mark it gone: once the shim is idle (or dead and not yet reaped) no
	// kill may walk the shim's descendants, which may then belong to its
	// next command (or, after reaping, to a process reusing its pid).
	killMu   sync.RWMutex
	treeGone bool
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

// spawn starts a command under a shim. On success the command is running
// and its output is not being read yet: the caller subscribes first, then
// calls run.
func (p *processService) spawn(spec spawnSpec) (c *command, stdout, stderr *os.File, ctl *bufio.Reader, err error) {
	var stdinR, stdinW *os.File
	if spec.stdin {
		stdinR, stdinW, err = os.Pipe()
	} else {
		stdinR, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, nil, nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("create stdin: %w", err))
	}
	stdoutR, stdoutW, err1 := os.Pipe()
	stderrR, stderrW, err2 := os.Pipe()
	// The parent's ends, closed on failure; the shim's ends, closed always
	// once the shim has its copies.
	ours := []*os.File{stdinW, stdoutR, stderrR}
	theirs := []*os.File{stdinR, stdoutW, stderrW}
	defer func() {
		for _, f := range theirs {
			_ = f.Close()
		}
		if err != nil {
			for _, f := range ours {
				_ = f.Close()
			}
		}
	}()
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("create pipes: %w", err))
	}

	req := shimRequest{UID: spec.acct.UID, GID: spec.acct.GID, Dir: spec.dir, Argv: append([]string{spec.cmd}, spec.args...), Env: spec.env}
	var shim *shimProc
	// A spare shim may have died since it started; then try a fresh one.
	for attempt := 0; ; attempt++ {
		if attempt == 0 {
			shim, err = p.srv.shims.get()
		} else {
			shim, err = p.srv.shims.start()
		}
		if err != nil {
			return nil, nil, nil, nil, connect.NewError(connect.CodeUnavailable, err)
		}
		err = sendShimRequest(shim.ctl, req, [3]*os.File{stdinR, stdoutW, stderrW})
		if err == nil {
			break
		}
		p.srv.shims.retire(shim)
		if attempt == 1 {
			return nil, nil, nil, nil, connect.NewError(connect.CodeInternal, fmt.Errorf("send command to shim: %w", err))
		}
	}

	c = &command{svc: p, shim: shim, stdin: stdinW, out: newOutput(), gone: make(chan struct{})}
	ctl = bufio.NewReader(shim.ctl)
	_ = shim.ctl.SetReadDeadline(time.Now().Add(startTimeout))
	line, rerr := ctl.ReadString('\n')
	_ = shim.ctl.SetReadDeadline(time.Time{})
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
		// The shim is idle again.
		p.srv.shims.put(shim)
		return nil, nil, nil, nil, connect.NewError(connect.CodeInvalidArgument, errors.New(line[len("error "):]))
	default:
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("shim ended before starting %s (%q, %v)", spec.cmd, line, rerr))
	}
	_ = syscall.Kill(shim.pid, syscall.SIGKILL)
	p.srv.shims.reap(shim)
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

// supervise follows the shim's messages: it ends the output when the main
// command exits and drops the command when its whole tree is gone.
func (c *command) supervise(ctl *bufio.Reader, stdoutDone, stderrDone <-chan struct{}) {
	ended, idle := false, false
	for !idle {
		line, err := ctl.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "exit "); ok && !ended {
			ws, perr := strconv.ParseUint(rest, 10, 32)
			if perr != nil {
				continue
			}
			ended = true
			c.mu.Lock()
			c.state = stateLingering // no more signals to its pid
			c.mu.Unlock()
			// When the tree emptied with the main command, the shim sent
			// "idle" in the same write: give the shim back first, so a
			// command started as soon as this one's stream ends finds it.
			if ctl.Buffered() >= len("idle\n") {
				if next, _ := ctl.Peek(len("idle\n")); string(next) == "idle\n" {
					_, _ = ctl.Discard(len(next))
					idle = true
					c.markTreeGone()
					c.svc.srv.shims.put(c.shim)
				}
			}
			c.mainExited(endEvent(syscall.WaitStatus(ws)), stdoutDone, stderrDone)
			continue
		}
		if line == "idle" {
			idle = true
			c.markTreeGone()
			c.svc.srv.shims.put(c.shim)
		}
	}
	if !ended {
		c.mainExited(&process.ProcessEvent_EndEvent{ExitCode: -1, Status: "lost: the shim ended without reporting"}, stdoutDone, stderrDone)
	}
	if !idle {
		// The shim died. Keep its pid reserved (unreaped) until no kill
		// can walk it any more.
		c.shim.waitExit()
		c.markTreeGone()
		c.svc.srv.shims.reap(c.shim)
	}
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
			continue
		case <-eof.C:
		}
		break
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

func (c *command) markTreeGone() {
	c.killMu.Lock()
	c.treeGone = true
	c.killMu.Unlock()
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

// kill SIGKILLs the main command and every process under the shim, and
// returns once they are dead.
func (c *command) kill() {
	c.killMu.RLock()
	defer c.killMu.RUnlock()
	if c.treeGone {
		return
	}
	if err := killDescendants(c.shim.pid, killTimeout); err != nil {
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
