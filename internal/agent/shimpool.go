package agent

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shimProc is a started shim, seen from the agent.
type shimProc struct {
	pid int
	ctl *os.File // the agent's end of the control socket
}

// maxSpareShims is how many idle shims the agent keeps. Each is a Go
// process waiting in a read, about 1.4 MiB of anonymous memory; one covers
// commands run one after the other, also next to long-running ones (a busy
// shim is not a spare and the pool refills).
const maxSpareShims = 1

// shimPool keeps idle shims, so that starting a command costs a message to a
// waiting shim instead of an exec of the agent's binary (milliseconds). A
// shim whose command's processes are all gone comes back to the pool. When
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
}

func newShimPool(srv *server) *shimPool { return &shimPool{srv: srv, ready: make(chan struct{})} }

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

// prime starts the first spare.
func (p *shimPool) prime() {
	p.mu.Lock()
	p.refillLocked()
	p.mu.Unlock()
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
		Env:   p.srv.baseEnv,
		Files: []uintptr{uintptr(null), uintptr(null), 2, uintptr(fds[1])},
		// Its own process group: `kill 0` in a command cannot reach the agent.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		_ = ctl.Close()
		return nil, fmt.Errorf("start shim %s: %w", argv[0], err)
	}
	return &shimProc{pid: pid, ctl: ctl}, nil
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
