package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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
	// holding the pipes must not keep the stream open. What the command
	// wrote before it exited is read whatever the wait: the end waits on
	// (up to drainWait) while a pipe still holds data or its reader is
	// publishing some, which on a loaded host takes longer than eofWait.
	eofWait   = 50 * time.Millisecond
	drainWait = 5 * time.Second
	// killTimeout bounds one SIGKILL sweep of a process tree.
	killTimeout = 5 * time.Second
	// startTimeout bounds how long a shim may take to start its command.
	startTimeout = 10 * time.Second
)

type commandState int

const (
	stateRunning   commandState = iota // the main command runs
	stateLingering                     // it ended; processes it left behind still run
	stateGone                          // every process of the command is gone
)

// supervisor watches over the process tree of one command: its main process
// and everything that process left behind. A command runs either in the
// agent's direct slot (directRun) or under a shim (shimRun); the command
// code sees no other difference.
//
// waitExit, waitGone and release are called in this order by one goroutine;
// kill and signal may run concurrently with them, but not once the tree is
// gone (see command.killMu).
type supervisor interface {
	slog.LogValuer
	// waitExit waits for the main process to exit and returns its wait
	// status; ok is false when the status was lost. gone reports that every
	// process of the tree was gone already.
	waitExit() (ws syscall.WaitStatus, ok, gone bool)
	// waitGone waits until every process of the tree is gone.
	waitGone()
	// kill SIGKILLs every process of the tree and returns once they are
	// dead, or after killTimeout.
	kill() error
	// signal sends sig once to every live process of the tree.
	signal(sig syscall.Signal) error
	// release gives back what supervised the tree, once it is gone and no
	// kill can walk it any more: the shim to its pool, or the direct slot.
	release()
}

// command is one process the agent started, from Start until every process
// of its tree is gone. Its supervisor (shim or direct slot) outlives the main
// command while processes it left behind run; the command record lives as
// long, so they can still be killed. Then the supervisor serves another
// command.
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
	tree   supervisor
	out    *output
	gone   chan struct{} // closed when every process of the command is gone
	// exited is closed once the main process's exit is seen: the command
	// no longer runs, and its tag is free for another Start.
	exited chan struct{}

	stdinMu     sync.Mutex // serialises writes
	stdin       *os.File   // nil when started without stdin; the terminal's master with one
	stdinClosed atomic.Bool
	// pty is the master of the command's terminal, nil without one: its
	// size is set through it (Update). Its output is read from it too.
	pty *os.File

	mu       sync.Mutex
	state    commandState
	timedOut bool
	timers   []*time.Timer
	// How the main command ended, beyond what envd's EndEvent says (Hutch's
	// Exited event tells it): set before the EndEvent is published.
	exitSignal syscall.Signal
	coreDumped bool

	// killMu is held shared while the tree is being killed, exclusively to
	// mark it gone: once the tree is gone no kill may walk it, since its
	// supervisor may then serve the next command (or a dead shim's pid be
	// reused once reaped).
	killMu   sync.RWMutex
	treeGone bool
}

// spawnSpec is what Start asks for, resolved.
type spawnSpec struct {
	acct  account
	cmd   string
	args  []string
	argv0 string // when not "", argv[0] instead of cmd (a login shell's "-sh")
	dir   string
	env   []string
	stdin bool
	// tty, when not nil, gives the command a new terminal of this size as
	// its stdin, stdout and stderr (stdin is then always open).
	tty  *unix.Winsize
	keep int // bytes of output to keep for replay (see output)
}

// stdio is a new command's standard streams: the ends it gets, and the
// agent's.
type stdio struct {
	theirs  [3]*os.File
	null    *os.File // the agent's /dev/null when it is among theirs: not closed
	stdin   *os.File // nil: none
	outputs []*outputPipe
	pty     *os.File // the terminal's master, with a terminal
}

// pipes makes the streams of a command without a terminal: a pipe for
// stdout and one for stderr, and one for stdin, else null (the agent's
// /dev/null, shared by every command: see devNull).
func pipes(withStdin bool, null *os.File) (s stdio, err error) {
	stdinR := null
	if withStdin {
		stdinR, s.stdin, err = os.Pipe()
		if err != nil {
			return s, connect.NewError(connect.CodeInternal, fmt.Errorf("create stdin: %w", err))
		}
	}
	s.null = null
	stdoutR, stdoutW, err1 := newOutputPipeFiles()
	stderrR, stderrW, err2 := newOutputPipeFiles()
	s.theirs = [3]*os.File{stdinR, stdoutW, stderrW}
	s.outputs = []*outputPipe{newOutputPipe(stdoutR, outStdout), newOutputPipe(stderrR, outStderr)}
	if err := errors.Join(err1, err2); err != nil {
		s.close()
		return s, connect.NewError(connect.CodeInternal, fmt.Errorf("create pipes: %w", err))
	}
	return s, nil
}

// newOutputPipeFiles is a pipe for a command's output: the agent's end polled,
// the command's end blocking from the start. os.Pipe makes both ends
// non-blocking and polled, and handing over the command's end makes it
// blocking again: a dozen system calls more per command, each slow under
// gVisor. The read end's flags are set outright, not read first: a new
// pipe's are O_RDONLY and nothing else.
func newOutputPipeFiles() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// closeTheirs closes the command's ends, once it (or its shim) has its
// copies.
func (s *stdio) closeTheirs() {
	for _, f := range s.theirs {
		if f != nil && f != s.null {
			_ = f.Close() // a terminal is there thrice: closed already
		}
	}
}

// close closes every end, when the command did not start.
func (s *stdio) close() {
	s.closeTheirs()
	for _, p := range s.outputs {
		if p.f != nil {
			_ = p.f.Close()
		}
	}
	if s.stdin != nil {
		_ = s.stdin.Close()
	}
}

// spawn starts a command, in the direct slot when it is free, else under a
// shim. On success the command is running and its output is not being read
// yet: the caller subscribes first, then calls run.
func (p *processService) spawn(spec spawnSpec) (c *command, outputs []*outputPipe, err error) {
	var std stdio
	if spec.tty != nil {
		std, err = openTerminal(*spec.tty, spec.acct)
	} else {
		std, err = pipes(spec.stdin, p.srv.devNull)
	}
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			std.close()
		} else {
			std.closeTheirs()
		}
	}()

	req := shimRequest{UID: spec.acct.UID, GID: spec.acct.GID, Dir: spec.dir, Argv: append([]string{spec.cmd}, spec.args...), Env: spec.env, TTY: spec.tty != nil}
	if spec.argv0 != "" {
		req.Argv[0], req.Path = spec.argv0, spec.cmd
	}
	tree, pid, err := p.srv.direct.run(req, std.theirs)
	if tree == nil && err == nil { // the slot is busy
		tree, pid, err = p.srv.shims.run(req, std.theirs)
	}
	if err != nil {
		return nil, nil, err
	}
	c = &command{svc: p, pid: pid, tree: tree, stdin: std.stdin, pty: std.pty, out: newOutput(spec.keep), gone: make(chan struct{}), exited: make(chan struct{})}
	return c, std.outputs, nil
}

// run starts reading the command's output and following its tree.
func (c *command) run(outputs []*outputPipe) {
	for _, p := range outputs {
		go c.pump(p)
	}
	go c.supervise(outputs)
}

// outputKind says which of envd's DataEvent fields a command's output
// goes in.
type outputKind int

const (
	outStdout outputKind = iota
	outStderr
	outPty // a terminal's: stdout and stderr as the terminal shows them
)

// outputPipe is the agent's reading end of a command's stdout or stderr,
// or of its terminal, and how far its reader (pump) is.
type outputPipe struct {
	f    *os.File
	kind outputKind
	// done is closed at EOF; busy is set while read data is being
	// published.
	done chan struct{}
	busy atomic.Bool
}

func newOutputPipe(f *os.File, kind outputKind) *outputPipe {
	return &outputPipe{f: f, kind: kind, done: make(chan struct{})}
}

// drained reports whether everything written to the pipe so far has been
// published: none is waiting in the pipe nor being published.
func (p *outputPipe) drained() bool {
	select {
	case <-p.done:
		return true
	default:
	}
	if p.busy.Load() {
		return false
	}
	raw, err := p.f.SyscallConn()
	if err != nil {
		return true // closed: its reader is done
	}
	pending := 0
	// TIOCINQ is FIONREAD: the bytes waiting in the pipe.
	if cerr := raw.Control(func(fd uintptr) { pending, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || err != nil {
		return true
	}
	return pending == 0 && !p.busy.Load()
}

// pump reads one output pipe until EOF, publishing what it reads. A
// terminal's master reads EIO, not EOF, once no process holds the
// terminal open: it ends the output alike.
func (c *command) pump(p *outputPipe) {
	defer close(p.done)
	defer p.f.Close()
	buf := make([]byte, readChunk)
	for {
		n, err := p.f.Read(buf)
		// From here until it is published, what was read is in neither
		// the pipe nor the output (see drained).
		p.busy.Store(true)
		if n > 0 {
			c.out.publish(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: dataEvent(p.kind, bytes.Clone(buf[:n]))}})
		}
		p.busy.Store(false)
		if err != nil {
			return
		}
	}
}

func dataEvent(kind outputKind, data []byte) *process.ProcessEvent_DataEvent {
	switch kind {
	case outStderr:
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: data}}
	case outPty:
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: data}}
	default:
		return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: data}}
	}
}

// supervise ends the output when the main command exits and drops the
// command when its whole tree is gone.
func (c *command) supervise(outputs []*outputPipe) {
	ws, ok, gone := c.tree.waitExit()
	c.mu.Lock()
	c.state = stateLingering // no more signals to its pid
	c.mu.Unlock()
	close(c.exited)
	if gone {
		// Give the supervisor back first, so that a command started as soon
		// as this one's stream ends finds it.
		c.treeDone()
	}
	end := &process.ProcessEvent_EndEvent{ExitCode: -1, Status: "lost: its exit status was not reported"}
	if ok {
		end = endEvent(ws)
		if ws.Signaled() {
			c.mu.Lock()
			c.exitSignal, c.coreDumped = ws.Signal(), ws.CoreDump()
			c.mu.Unlock()
		}
	}
	c.mainExited(end, gone, outputs...)
	if !gone {
		c.tree.waitGone()
		c.treeDone()
	}
	c.finish()
}

// killWait bounds how long the end of a timed-out command waits for its
// tree to be killed.
const killWait = 2 * time.Second

// mainExited publishes the end of a command whose main process exited,
// once its output is read: to EOF when nothing of its tree is left (EOF is
// then only the pumps' scheduling away); else for eofWait, and on while a
// pipe holds what was written before, up to drainWait.
func (c *command) mainExited(end *process.ProcessEvent_EndEvent, treeGone bool, pipes ...*outputPipe) {
	c.mu.Lock()
	c.state = stateLingering
	timedOut := c.timedOut
	c.mu.Unlock()
	c.closeStdin()
	if timedOut {
		errTimeout := "timeout"
		end.Error = &errTimeout
		// The timeout kills the whole tree, also what survived the SIGTERM,
		// before the end is told: the caller's next command must not find
		// it still there. A tree that takes long to die (a process in
		// uninterruptible sleep) holds the end back 2 s at most.
		killed := make(chan struct{})
		go func() {
			c.kill()
			close(killed)
		}()
		select {
		case <-killed:
		case <-time.After(killWait):
		}
	}
	awaitOutput(treeGone, pipes)
	c.out.end(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}})
}

// awaitOutput waits until the pipes are read (see mainExited).
func awaitOutput(treeGone bool, pipes []*outputPipe) {
	now := time.Now()
	eofBy, deadline := now.Add(eofWait), now.Add(drainWait)
	for _, p := range pipes {
		if !awaitPipe(p, treeGone, eofBy, deadline) {
			return
		}
	}
}

// awaitPipe waits until p is read to EOF, or, when something of the tree
// may hold it open, until eofBy and then while it is not drained; it
// reports false when deadline passed first.
func awaitPipe(p *outputPipe, treeGone bool, eofBy, deadline time.Time) bool {
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return false
		}
		next := deadline
		if !treeGone {
			if !now.Before(eofBy) {
				if p.drained() {
					return true
				}
				next = now.Add(5 * time.Millisecond) // look again
			} else {
				next = eofBy
			}
		}
		if next.After(deadline) {
			next = deadline
		}
		t := time.NewTimer(next.Sub(now))
		select {
		case <-p.done:
			t.Stop()
			return true
		case <-t.C:
		}
	}
}

// endEvent describes a wait status the way Go's os.ProcessState.String does.
func endEvent(ws syscall.WaitStatus) *process.ProcessEvent_EndEvent {
	switch {
	case ws.Exited():
		return &process.ProcessEvent_EndEvent{
			ExitCode: int32(ws.ExitStatus()), // #nosec G115 -- an exit status is 0..255 or -1
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

// treeDone marks the tree gone, once no kill walks it, and releases its
// supervisor.
func (c *command) treeDone() {
	c.killMu.Lock()
	c.treeGone = true
	c.killMu.Unlock()
	c.tree.release()
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

// kill SIGKILLs the main command and every process of its tree, and
// returns once they are dead.
func (c *command) kill() {
	c.killMu.RLock()
	defer c.killMu.RUnlock()
	if c.treeGone {
		return
	}
	if err := c.tree.kill(); err != nil {
		c.svc.srv.log.Warn("kill process tree", logPID, c.pid, logError, err)
	}
}

// signalLeftovers sends sig to what a command whose main process ended
// left behind: every process of its tree.
func (c *command) signalLeftovers(sig syscall.Signal) {
	c.killMu.RLock()
	defer c.killMu.RUnlock()
	if c.treeGone {
		return
	}
	if err := c.tree.signal(sig); err != nil {
		c.svc.srv.log.Warn("signal process tree", logPID, c.pid, logError, err)
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

// waitDropped waits, up to killTimeout, for a command whose tree was
// killed to be dropped: its main process's exit seen and the dead reaped.
// Then a Start of its tag right after the kill is not refused, and a
// second kill finds nothing left to kill (as E2B's SDK expects).
func (c *command) waitDropped() {
	t := time.NewTimer(killTimeout)
	defer t.Stop()
	select {
	case <-c.gone:
	case <-t.C:
	}
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
	case errors.Is(err, syscall.EIO): // a terminal nothing holds open any more
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the terminal of process %d is closed", c.pid))
	default:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("write stdin of process %d: %w", c.pid, err))
	}
}

// feedStdin writes input to the command's stdin and closes it. It runs
// beside the command's output, so that a command that reads slowly cannot
// stall it; a command that ends without reading it all closes the pipe,
// which ends the write.
func (c *command) feedStdin(input []byte) {
	if len(input) > 0 {
		if err := c.writeStdin(context.Background(), input); err != nil {
			c.svc.srv.log.Debug("write stdin", logPID, c.pid, logError, err)
		}
	}
	c.closeStdin()
}

// exit returns the signal that ended the main command, if one did, and
// whether it dumped core; known once its EndEvent is out.
func (c *command) exit() (sig syscall.Signal, coreDumped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitSignal, c.coreDumped
}

// closeStdin signals EOF on the command's stdin. A write blocked on a full
// pipe fails.
func (c *command) closeStdin() {
	if c.stdin != nil && c.stdinClosed.CompareAndSwap(false, true) {
		_ = c.stdin.Close()
	}
}
