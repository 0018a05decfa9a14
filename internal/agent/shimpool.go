package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
)

// shimProc is a started shim, seen from the agent.
type shimProc struct {
	pid int
	ctl *os.File // the agent's end of the control socket
	// refused is the pids limit's count of refusals once it was started
	// (see refusals): more later tells why it died, if it does.
	refused int64
}

// maxSpareShims is how many idle shims the agent keeps. Each is a Go
// process waiting in a read, about 1.4 MiB of anonymous memory. Commands run
// one after the other mostly take the direct slot (see directSlot); the
// spare is for a command started while another's tree still runs, so that
// it does not wait for a shim to start (a busy shim is not a spare and the
// pool refills).
const maxSpareShims = 1

// shimPool keeps idle shims for the commands that do not get the direct slot,
// so that starting one costs a message to a waiting shim instead of an exec
// of the agent's binary (milliseconds). It is primed once a command has held
// the direct slot for primeDelay: a second one, run next to it, then finds
// a spare instead of waiting. A shim whose command's processes are all gone comes back to the pool. When
// the pool stays empty a spare is started in the background; a command that
// finds none waits for the spare being started, or starts its own.
type shimPool struct {
	srv *server

	mu       sync.Mutex
	spares   []*shimProc
	puts     uint64 // shims given back so far
	starting bool
	ready    chan struct{} // closed and replaced when a spare comes or a start ends
	closed   bool

	pidsEvents []string // see refusals

	// live counts the shims started, or being started, and not reaped yet:
	// shutting down waits for them, so that the agent leaves no child.
	liveMu   sync.Mutex
	live     int
	noneLive chan struct{} // closed when live drops to 0
}

func newShimPool(srv *server) *shimPool {
	return &shimPool{srv: srv, ready: make(chan struct{}), pidsEvents: pidsEvents}
}

// pidsEvents are where the sandbox's pids cgroup counts the forks its
// limit refused (the line "max N"): the cgroup v1 hierarchy the daemon
// binds, or the cgroup v2 namespace's root.
var pidsEvents = []string{"/sys/fs/cgroup/pids/pids.events", "/sys/fs/cgroup/pids.events"}

// refusals is how many forks the sandbox's pids limit has refused so far,
// or -1 where the agent cannot see its count (gVisor).
func (p *shimPool) refusals() int64 {
	for _, path := range p.pidsEvents {
		b, err := os.ReadFile(path) // #nosec G304 -- fixed cgroup paths, or a test's
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "max "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// shimLost is the error of command, whose shim died before starting it
// (err says how): resource_exhausted when the sandbox's pids limit refused
// a fork or a thread since the shim started, as a shim whose Go runtime
// cannot make a thread ends; internal otherwise.
func (p *shimPool) shimLost(shim *shimProc, command string, err error) error {
	if now := p.refusals(); shim.refused >= 0 && now > shim.refused {
		return spawnError(connect.CodeInternal, fmt.Errorf("start %s: its shim ended: %w", command, syscall.EAGAIN))
	}
	return connect.NewError(connect.CodeInternal, err)
}

// get returns an idle shim.
func (p *shimPool) get() (*shimProc, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("agent is shutting down")
		}
		if n := len(p.spares); n > 0 {
			s := p.spares[n-1]
			p.spares = p.spares[:n-1]
			if n == 1 {
				p.refillLaterLocked()
			}
			p.mu.Unlock()
			return s, nil
		}
		if !p.starting {
			p.mu.Unlock()
			return p.start()
		}
		ready := p.ready
		p.mu.Unlock()
		<-ready
	}
}

// put returns an idle shim to the pool, or retires it when the pool is full.
func (p *shimPool) put(s *shimProc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.puts++
	if p.closed || len(p.spares) >= maxSpareShims {
		p.retire(s)
		return
	}
	p.spares = append(p.spares, s)
	p.signalLocked()
}

func (p *shimPool) signalLocked() {
	close(p.ready)
	p.ready = make(chan struct{})
}

// refillDelay is how long the pool may stay empty before it starts a spare:
// a short command gives its shim back sooner, and an exec competes for the
// CPU with the command just started.
const refillDelay = 20 * time.Millisecond

// refillLaterLocked starts a spare after refillDelay if the pool stayed
// empty all along (no shim came back meanwhile).
func (p *shimPool) refillLaterLocked() {
	puts := p.puts
	time.AfterFunc(refillDelay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.spares) == 0 && p.puts == puts {
			p.refillLocked()
		}
	})
}

// primeDelay is how long a command holds the direct slot before the first
// spare boots. A command that holds it that long may hold it for long (a
// server, a background process), and the next command would need a shim:
// one is then ready for it. A sandbox whose commands end sooner never
// starts a shim (a Go process: some 15 ms of CPU, 1.4 MiB), and the boot
// does not take CPU from a command just started, which showed as 1.5 ms
// more to the first command's output when it booted at once.
const primeDelay = 100 * time.Millisecond

// primeUnless starts a spare after primeDelay if the pool has none by then
// and released has not been closed.
func (p *shimPool) primeUnless(released <-chan struct{}) {
	time.AfterFunc(primeDelay, func() {
		select {
		case <-released:
			return
		default:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.spares) == 0 {
			p.refillLocked()
		}
	})
}

// refillLocked starts a spare in the background unless one is on its way.
func (p *shimPool) refillLocked() {
	if p.closed || p.starting {
		return
	}
	p.starting = true
	go func() {
		s, err := p.start()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.starting = false
		p.signalLocked()
		switch {
		case err != nil:
			p.srv.log.Warn("start spare shim", logError, err)
		case p.closed || len(p.spares) >= maxSpareShims:
			p.retire(s)
		default:
			p.spares = append(p.spares, s)
		}
	}()
}

// start starts a shim.
func (p *shimPool) start() (*shimProc, error) {
	p.addLive(1)
	s, err := p.spawn()
	if err != nil {
		p.addLive(-1)
	}
	return s, err
}

func (p *shimPool) spawn() (*shimProc, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("create control socket: %w", err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return nil, fmt.Errorf("create control socket: %w", err)
	}
	ctl := os.NewFile(uintptr(fds[0]), "shim-control")
	defer syscall.Close(fds[1])
	null, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = ctl.Close()
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer syscall.Close(null)
	argv := p.srv.cfg.Shim
	pid, err := p.srv.reaper.spawn(argv[0], argv, &syscall.ProcAttr{
		// The shim is the agent's binary, on one processor too (see
		// agentv1.OneProcessor); a command gets the environment its
		// request gives, not the shim's.
		Env:   append([]string{"GOMAXPROCS=1"}, p.srv.baseEnv...),
		Files: []uintptr{uintptr(null), uintptr(null), 2, uintptr(fds[1])},
		// Its own process group: `kill 0` in a command cannot reach the agent.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	}, true)
	if err != nil {
		_ = ctl.Close()
		return nil, fmt.Errorf("start shim %s: %w", argv[0], err)
	}
	// Read once it runs, off the command's path for a spare: a refused
	// fork that spawn tried again is not this shim's end.
	return &shimProc{pid: pid, ctl: ctl, refused: p.refusals()}, nil
}

// close retires the spares; later gets fail and shims put back retire.
func (p *shimPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.spares {
		p.retire(s)
	}
	p.spares = nil
	p.signalLocked()
}

// retire makes an idle shim exit (it reads EOF) and reaps it.
func (p *shimPool) retire(s *shimProc) {
	_ = s.ctl.Close()
	go p.reap(s)
}

// reap waits for a shim to exit, reaps it and closes its socket.
func (p *shimPool) reap(s *shimProc) {
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(s.pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	_ = s.ctl.Close()
	p.srv.reaper.forget(s.pid)
	p.addLive(-1)
}

func (p *shimPool) addLive(n int) {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	if p.live == 0 {
		p.noneLive = make(chan struct{})
	}
	p.live += n
	if p.live == 0 {
		close(p.noneLive)
	}
}

// wait waits until every shim is reaped, or until ctx is done.
func (p *shimPool) wait(ctx context.Context) {
	p.liveMu.Lock()
	none := p.noneLive
	live := p.live
	p.liveMu.Unlock()
	if live == 0 {
		return
	}
	select {
	case <-none:
	case <-ctx.Done():
	}
}

// waitExit waits until the shim has exited, leaving it unreaped: its pid
// stays reserved until reap.
func (s *shimProc) waitExit() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, s.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// shimRun is a command running under a shim: the agent's side of the shim
// protocol (see Shim), from the request on.
type shimRun struct {
	pool *shimPool
	shim *shimProc
	ctl  *bufio.Reader
	dead bool // the control socket ended: the shim died
}

var _ supervisor = (*shimRun)(nil)

// run starts a command under an idle shim, with stdio as its fds 0, 1 and 2.
// It returns once the shim reports the command's pid.
func (p *shimPool) run(req shimRequest, stdio [3]*os.File) (supervisor, uint32, error) {
	var shim *shimProc
	var err error
	// A spare shim may have died since it started; then try a fresh one.
	for attempt := 0; ; attempt++ {
		if attempt == 0 {
			shim, err = p.get()
		} else {
			shim, err = p.start()
		}
		if err != nil {
			return nil, 0, spawnError(connect.CodeUnavailable, err)
		}
		err = sendShimRequest(shim.ctl, req, stdio)
		if err == nil {
			break
		}
		p.retire(shim)
		if attempt == 1 {
			return nil, 0, p.shimLost(shim, req.Argv[0], fmt.Errorf("send command to shim: %w", err))
		}
	}

	ctl := bufio.NewReader(shim.ctl)
	_ = shim.ctl.SetReadDeadline(time.Now().Add(startTimeout))
	line, rerr := ctl.ReadString('\n')
	_ = shim.ctl.SetReadDeadline(time.Time{})
	line = strings.TrimSuffix(line, "\n")
	switch {
	case strings.HasPrefix(line, "pid "):
		pid, perr := strconv.ParseUint(line[len("pid "):], 10, 32)
		if perr == nil {
			return &shimRun{pool: p, shim: shim, ctl: ctl}, uint32(pid), nil
		}
		err = connect.NewError(connect.CodeInternal, fmt.Errorf("shim: bad message %q", line))
	case strings.HasPrefix(line, "error "):
		// The shim is idle again.
		p.put(shim)
		return nil, 0, connect.NewError(connect.CodeInvalidArgument, errors.New(line[len("error "):]))
	default:
		err = p.shimLost(shim, req.Argv[0], fmt.Errorf("shim ended before starting %s (%q, %v)", req.Argv[0], line, rerr))
	}
	_ = syscall.Kill(shim.pid, syscall.SIGKILL)
	p.reap(shim)
	return nil, 0, err
}

func (r *shimRun) waitExit() (ws syscall.WaitStatus, ok, gone bool) {
	for {
		line, err := r.ctl.ReadString('\n')
		if err != nil {
			r.dead = true
			return 0, false, false
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "idle" { // not sent before exit; the tree is gone anyway
			return 0, false, true
		}
		rest, found := strings.CutPrefix(line, "exit ")
		if !found {
			continue
		}
		n, err := strconv.ParseUint(rest, 10, 32)
		if err != nil {
			continue
		}
		// When the tree emptied with the main command, the shim sent "idle"
		// in the same write.
		if r.ctl.Buffered() >= len("idle\n") {
			if next, _ := r.ctl.Peek(len("idle\n")); string(next) == "idle\n" {
				_, _ = r.ctl.Discard(len(next))
				gone = true
			}
		}
		return syscall.WaitStatus(n), true, gone
	}
}

func (r *shimRun) waitGone() {
	for !r.dead {
		line, err := r.ctl.ReadString('\n')
		if err != nil {
			r.dead = true
		} else if line == "idle\n" {
			return
		}
	}
	// The shim died. Keep its pid reserved (unreaped) until no kill can walk
	// it any more: release reaps it.
	r.shim.waitExit()
}

func (r *shimRun) kill() error { return killDescendants(r.shim.pid, killTimeout) }

func (r *shimRun) signal(sig syscall.Signal) error {
	if err := signalEach(func() ([]int, error) { return LiveDescendants(r.shim.pid) }, sig); err != nil {
		return fmt.Errorf("signal processes under pid %d: %w", r.shim.pid, err)
	}
	return nil
}

func (r *shimRun) release() {
	if r.dead {
		r.pool.reap(r.shim)
	} else {
		r.pool.put(r.shim)
	}
}

func (r *shimRun) LogValue() slog.Value { return slog.StringValue("shim " + strconv.Itoa(r.shim.pid)) }
