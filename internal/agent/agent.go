// Package agent is the in-sandbox agent: its own binary, cmd/hutch-agent
// (see Main), runs it as PID 1 in every sandbox. It serves, over Connect-RPC on a unix socket that the
// daemon reaches from the host, the process and filesystem services of api/
// (the same shapes as E2B's envd, with envd's plain HTTP GET/POST /files and
// GET /health), and Hutch's own service hutch.agent.v1 (api/agent/v1): the
// calls envd has no words for, which the daemon makes through
// internal/runtime/agentclient.
//
// The agent supervises one command tree itself (its direct slot, see
// directSlot): a command started while no other command's processes run is
// its own child, and what that command leaves behind is re-parented to it.
// A command started while the slot is taken runs under a shim (see Shim), a
// child subreaper that keeps what its command leaves behind to itself. Either
// way the agent can kill a command together with everything it left behind,
// and the first command of a sandbox does not wait for a shim to start.
//
// The package imports nothing daemon-side (store, backends, errdefs, …): it is
// small and it is what runs inside untrusted sandboxes. internal/layers_test.go
// guards it.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent/hutchagentconnect"
	"github.com/hutchdev/hutch/internal/agent/agentpb/process/processconnect"
)

// Log attribute keys.
const (
	logPID        = "pid"
	logTag        = "tag"
	logUser       = "user"
	logError      = "error"
	logSupervisor = "supervisor"
	logSocket     = "socket"
	logSignal     = "signal"
	logStatus     = "status"
)

// Config configures the agent. The zero value of every field but Listener
// and Socket, one of which is required, means its default.
type Config struct {
	// Listener is the unix socket to serve on, already listening. The daemon
	// makes it on the host and the runtime hands it to the agent as a file
	// descriptor, so the agent needs no path to the host inside the sandbox.
	Listener net.Listener
	// Socket is the path of a unix socket to listen on when there is no
	// Listener.
	Socket string
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// DefaultUser is the user requests act as when they name none ("user").
	DefaultUser string
	// PasswdFile and GroupFile are where users and groups are looked up
	// ("/etc/passwd", "/etc/group"). Tests point them at their own files.
	PasswdFile string
	GroupFile  string
	// Shim is the command line that starts a shim (see Shim). Default:
	// /proc/self/exe agent shim.
	Shim []string
	// KeepAlive is how long a process or watch stream may stay silent
	// before the agent sends a keepalive event (30s, like envd).
	KeepAlive time.Duration
	// ShutdownTimeout bounds how long shutting down waits for process trees
	// to die and connections to close (5s).
	ShutdownTimeout time.Duration
	// NprocExempt says the sandbox's process limit is RLIMIT_NPROC (gVisor's
	// kernel counts the processes), which the agent's CAP_SYS_RESOURCE
	// exempts it from: as PID 1 it then makes no threads ahead (see
	// nprocExempt), unless it finds it lacks that capability.
	NprocExempt bool
	// TenantTasks is the tasks file of the cgroup v1 the sandbox's
	// processes are to be in, below the agent's (runc): as PID 1 the agent
	// then forks them from a thread it moves there (see forkThread) and
	// makes no threads ahead. Run closes it.
	TenantTasks *os.File

	// reapOrphans forces orphan reaping on when the agent is not PID 1
	// (tests); the agent then also makes itself a child subreaper, so that
	// orphans come to it as they come to PID 1.
	reapOrphans bool
	// noDirect runs every command under a shim (tests).
	noDirect bool
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.DefaultUser == "" {
		c.DefaultUser = "user"
	}
	if c.PasswdFile == "" {
		c.PasswdFile = "/etc/passwd"
	}
	if c.GroupFile == "" {
		c.GroupFile = "/etc/group"
	}
	if len(c.Shim) == 0 {
		c.Shim = []string{"/proc/self/exe", "agent", "shim"}
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 30 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	return c
}

// server holds what the services share.
type server struct {
	cfg      Config
	log      *slog.Logger
	reaper   *reaper
	direct   *directSlot
	shims    *shimPool
	baseEnv  []string // the agent's environment minus HUTCH_AGENT_* and the runtime's GOMAXPROCS (see newServer)
	procs    *processService
	fs       *filesystemService
	contexts *contexts
	accounts accountFiles
	// devNull is /dev/null, opened once: the stdin of every command started
	// without one. An open and its poller's calls per command are
	// measurable under gVisor.
	devNull *os.File
}

func newServer(cfg Config) *server {
	s := &server{
		cfg:    cfg,
		log:    cfg.Logger,
		reaper: newReaper(cfg.Logger),
	}
	// A GOMAXPROCS=1 given with OneProcessor is the agent's alone.
	oneProcessor := os.Getenv(agentv1.OneProcessor) != ""
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HUTCH_AGENT_") && !(oneProcessor && kv == "GOMAXPROCS=1") {
			s.baseEnv = append(s.baseEnv, kv)
		}
	}
	s.direct = &directSlot{srv: s}
	s.shims = newShimPool(s)
	s.procs = newProcessService(s)
	s.fs = &filesystemService{srv: s}
	s.contexts = newContexts(s)
	return s
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/"+processconnect.ProcessName+"/", builtOnFirstCall(func() http.Handler {
		_, h := processconnect.NewProcessHandler(s.procs)
		return withFlushGate(h)
	}))
	mux.Handle("/"+filesystemconnect.FilesystemName+"/", builtOnFirstCall(func() http.Handler {
		_, h := filesystemconnect.NewFilesystemHandler(s.fs)
		return h
	}))
	mux.Handle("/"+hutchagentconnect.AgentName+"/", withFlushGate(byProcedure(agentProcedures(&agentService{srv: s})...)))
	mux.HandleFunc("GET /files", s.getFile)
	mux.HandleFunc("POST /files", s.postFile)
	mux.HandleFunc("GET "+agentv1.TunnelPath, s.tunnel)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// builtOnFirstCall is the handler build makes, made at its first request.
// A Connect service's handler takes 0.1–0.3 ms of CPU to build (each
// method for each of three protocols), more in a process just started, and
// an agent starts in every sandbox, many of which call one service or
// none.
func builtOnFirstCall(build func() http.Handler) http.Handler {
	h := sync.OnceValue(build)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h().ServeHTTP(w, r) })
}

// Run serves the agent on cfg.Listener or cfg.Socket until ctx is done or,
// when the agent is PID 1, until it receives SIGTERM, SIGINT or SIGHUP.
// Shutting down stops serving and SIGKILLs every process tree the agent
// started; Run then returns nil.
//
// As PID 1 the agent also reaps orphans that the kernel re-parents to it (see
// reaper), and runs commands in its direct slot. Reaping assumes Run is the
// only thing in the process that starts children, which holds for `hutch
// agent`.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Socket == "" && cfg.Listener == nil {
		return errors.New("agent: no listener and no socket path")
	}
	cfg = cfg.withDefaults()
	s := newServer(cfg)
	// Opened blocking, as a command's stdin must be; os.Open would make
	// it the poller's.
	nullFD, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("agent: open %s: %w", os.DevNull, err)
	}
	s.devNull = os.NewFile(uintptr(nullFD), os.DevNull)
	defer s.devNull.Close()
	var (
		ln     net.Listener
		reopen *reopenable
	)
	if cfg.Listener != nil {
		ln = cfg.Listener
	} else {
		if reopen, err = newReopenable(cfg.Socket); err != nil {
			return err
		}
		ln = reopen
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	pid1 := os.Getpid() == 1
	if !pid1 && cfg.TenantTasks != nil {
		_ = cfg.TenantTasks.Close() // forks go on from any thread
	}
	if pid1 {
		// Before anything of the sandbox runs beside it.
		if err := s.guardThreads(cfg); err != nil {
			return err
		}
		// Root commands in the sandbox share the agent's uid. Not dumpable,
		// the agent's /proc entries (its fds: the log file on the host, its
		// memory) are closed to them, as to a process without CAP_SYS_PTRACE.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("make the agent non-dumpable: %w", err)
		}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer signal.Stop(sigs)
		go func() {
			select {
			case sig := <-sigs:
				s.log.Info("shutting down", logSignal, sig.String())
				stop()
			case <-runCtx.Done():
			}
		}()
		if reopen != nil {
			go s.relisten(runCtx, reopen)
		}
	}
	if pid1 || cfg.reapOrphans {
		direct := !cfg.noDirect
		if !pid1 {
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				// Orphans would escape to init: no direct slot.
				s.log.Warn("become a child subreaper", logError, err)
				direct = false
			} else {
				defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()
			}
		}
		if direct {
			defer unignoreCommandSignals()()
		}
		s.direct.setEnabled(direct)
		// The reaper outlives shutdown: the direct tree's processes it kills
		// are the reaper's to reap.
		reapCtx, stopReaping := context.WithCancel(context.WithoutCancel(ctx))
		reaped := make(chan struct{})
		go func() {
			defer close(reaped)
			s.reaper.run(reapCtx, s.direct.round)
		}()
		defer func() {
			stopReaping()
			<-reaped
		}()
	}

	hs := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	s.log.Info("agent serving", logSocket, ln.Addr().String())

	var serveErr error
	select {
	case <-runCtx.Done():
	case serveErr = <-served:
	}
	s.shutdown(hs)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// relisten closes and reopens the agent's listener on agentv1's
// SignalUnlisten and SignalRelisten (see reopenable) until ctx is done.
func (s *server) relisten(ctx context.Context, r *reopenable) {
	unlisten, relisten := unix.SignalNum("SIG"+agentv1.SignalUnlisten), unix.SignalNum("SIG"+agentv1.SignalRelisten)
	if unlisten == 0 || relisten == 0 {
		s.log.Error("unknown listener signals", "unlisten", agentv1.SignalUnlisten, "relisten", agentv1.SignalRelisten)
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unlisten, relisten)
	defer signal.Stop(sigs)
	for {
		select {
		case sig := <-sigs:
			if sig == unlisten {
				r.unlisten()
				s.log.Info("listener closed for a checkpoint")
				continue
			}
			if err := r.open(); err != nil {
				s.log.Error("listen again after a restore", logError, err)
				continue
			}
			s.log.Info("listening again after a restore", logSocket, r.path)
		case <-ctx.Done():
			return
		}
	}
}

// listen returns a new listener on cfg.Socket, which only root can connect
// to.
func listen(cfg Config) (net.Listener, error) {
	if err := os.Remove(cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", cfg.Socket, err)
	}
	ln, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Socket, err)
	}
	// The listener removes the socket file when closed.
	if err := os.Chmod(cfg.Socket, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", cfg.Socket, err)
	}
	return ln, nil
}

// shutdown stops accepting connections, kills every process tree and waits,
// within cfg.ShutdownTimeout, for the trees and the shims to be gone and the
// open streams to end.
func (s *server) shutdown(hs *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(ctx) }()
	s.direct.setEnabled(false)
	s.fs.closeWatchers() // polled watchers; streams end with their connections
	s.contexts.closeAll()
	s.shims.close()
	s.procs.killAll(ctx)
	s.shims.wait(ctx)
	// With the trees gone, the streams that followed them end at once. A
	// connection that never sent a request (an HTTP client's spare) would
	// hold Shutdown for 5 s, the age at which net/http counts a new
	// connection idle: what is still open after streamsEndWait is closed.
	wait := time.NewTimer(streamsEndWait)
	defer wait.Stop()
	select {
	case err := <-shut:
		if err != nil {
			_ = hs.Close()
		}
	case <-wait.C:
		_ = hs.Close()
		<-shut
	}
	s.accounts.close()
}

// streamsEndWait is how long shutdown lets the calls still open end once
// every process tree is gone.
const streamsEndWait = 500 * time.Millisecond
