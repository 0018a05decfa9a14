// Package oci runs sandboxes with an OCI runtime binary (runc, or gVisor's
// runsc): it writes a bundle whose root is the template with a private
// overlay on top, and drives the runtime's command line as containerd does.
package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/base/timerslack"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/disk"
	"github.com/hutchdev/hutch/internal/runtime/procexit"
)

var (
	_ backend.Backend   = (*Runtime)(nil)
	_ backend.Builder   = (*Runtime)(nil)
	_ backend.Pauser    = (*Runtime)(nil)
	_ backend.Suspender = (*Runtime)(nil)
)

// Config configures a Runtime.
type Config struct {
	// Name is the backend's name ("runc", "gvisor").
	Name string
	// Binary is the runtime executable, a path or a name looked up in PATH.
	Binary string
	// Install says how to get Binary, for the health report when it is
	// missing ("apt-get install runc").
	Install string
	// Flags go before the subcommand of every invocation, after --root
	// (runsc: --platform=systrap, --host-uds=all).
	Flags []string
	// Checkpoints: a suspend saves the sandbox's memory and processes
	// (runsc checkpoint) and the resume restores them (runsc restore).
	// Needs AgentListens: the agent closes its listener for the checkpoint.
	Checkpoints bool
	// AgentListens makes the agent listen on a socket of its own, in a host
	// directory bind-mounted into the sandbox, where by default the daemon
	// makes the socket and the runtime hands it over (see listenAgent).
	// gVisor needs it: it cannot accept on a host socket handed in.
	AgentListens bool
	// StubsTakeOOMKills means the runtime is gVisor on systrap, whose
	// host OOM kills are steered to the process that caused them, not
	// the sandbox's kernel (see oom.go).
	StubsTakeOOMKills bool
	// KernelCountsProcesses means the runtime is a kernel of its own
	// (gVisor) whose host tasks are not the sandbox's processes: the process
	// limit is then RLIMIT_NPROC inside, and the cgroup's pids limit leaves
	// room for the runtime's own threads and stubs (see specFor).
	KernelCountsProcesses bool
	// MountsTmpfsAtTmp means the runtime puts a tmpfs of its own at /tmp
	// unless the bundle mounts something there (gVisor does): the bundle
	// then binds the root's own /tmp there, so that /tmp stays on the
	// sandbox's disk and within its limit.
	MountsTmpfsAtTmp bool
	// UserNamespace runs each sandbox in a user namespace of its own, its
	// ids 0–65535 a range of host ids no one else has (see userns.go).
	// gVisor does not need one: its kernel is the sandbox's, in user
	// space, itself confined on the host.
	UserNamespace bool
	// LiveMounts means binds can be mounted into a running sandbox
	// (Attach): its mounts are the host kernel's. Not gVisor's, whose
	// mounts are its own kernel's, made at its start.
	LiveMounts bool
	// DeletesByState means a container whose init has ended is deleted
	// by removing its cgroups and its directory in StateRoot, which is
	// all the runtime's own delete does for it (runc): a process fewer
	// per delete. A container whose init runs, or has no pid file, goes
	// through the runtime's delete.
	DeletesByState bool
	// SealedCopy runs the runtime from a sealed in-memory copy of its
	// binary, made once (runc, which otherwise copies itself at every
	// container start: see sealed.go).
	SealedCopy bool
	// CgroupBinds shows a sandbox its cgroups by binds of its own cgroup
	// directories, on a host of cgroup v1 hierarchies (see cgroupMounts).
	// Not for gVisor, whose kernel has a cgroup filesystem of its own.
	CgroupBinds bool
	// StartNamespace starts each container from a mount namespace of its
	// own, not the host's, which holds every sandbox's mounts (runc: see
	// mountns.go).
	StartNamespace bool
	// DefaultTimerSlack starts the runtime's sandbox processes with the
	// kernel's timer slack rather than the daemon's coarser one, which
	// they would inherit: gVisor's kernel keeps the sandbox's time with
	// host timers (see timerslack). Not with StartNamespace.
	DefaultTimerSlack bool
	// SeccompErrnoIsEPERM means the runtime fails every call the bundle's
	// seccomp profile refuses with EPERM, whatever errno it names (runsc
	// does): see seccompProfile.
	SeccompErrnoIsEPERM bool
	// NetnsDir is where each sandbox's network namespaces are kept (see
	// network.go); "" gives sandboxes loopback only.
	NetnsDir string
	// CopiesNetns means the runtime copies a network namespace it is given
	// into a network stack of its own (gVisor's netstack, runsc
	// --network=sandbox).
	CopiesNetns bool
	// OwnNetwork means the sandbox's network is the runtime's own (gVisor's
	// kernel has its loopback), not a host network namespace: ListenIn
	// cannot reach it.
	OwnNetwork bool
	// AgentTimeout bounds how long Create waits for an agent that listens
	// itself to start (30 s: an agent under gVisor, on a loaded two-core
	// host, took over 10 s to listen after a restart).
	AgentTimeout time.Duration
	// StateRoot is the runtime's --root: where it keeps container state.
	StateRoot string
	// SandboxDir holds one directory per sandbox: bundle, the link to its
	// disk and the agent's socket.
	SandboxDir string
	// Disks gives each sandbox the disk its writable layer is on, of the
	// size of its disk limit. Required.
	Disks *disk.Pool
	// AgentExe is the host path of the executable run as the sandbox's agent
	// (the daemon's own).
	AgentExe string
	// IDRegistry is where user namespace id ranges are claimed, shared by
	// every daemon on the host (DefaultIDRegistry when empty; see
	// idranges.go).
	IDRegistry string
	// Exits sees sandboxes' processes end (see Watch); nil: Watch is not
	// offered.
	Exits  *procexit.Watcher
	Logger *slog.Logger
}

// Runtime is a backend.Backend driving an OCI runtime binary.
type Runtime struct {
	cfg Config
	log *slog.Logger
	ids *idAllocator // with UserNamespace

	sealOnce sync.Once
	exe      string // what the runtime is run by (see executable)

	starts startNS // with StartNamespace

	// starting holds the sandboxes started whose agent, which listens
	// itself, has not answered yet, each with when to give up on it (a
	// time.Time): their first dial waits for it (see DialAgent).
	starting sync.Map
}

// New returns a Runtime. It does not check that the runtime works: see Probe.
func New(cfg Config) *Runtime {
	if cfg.AgentTimeout == 0 {
		cfg.AgentTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.IDRegistry == "" {
		cfg.IDRegistry = DefaultIDRegistry
	}
	return &Runtime{cfg: cfg, log: log, ids: &idAllocator{registry: cfg.IDRegistry, sandboxDir: cfg.SandboxDir}}
}

func (r *Runtime) Name() string { return r.cfg.Name }

// containerPrefix marks the runtime's containers as Hutch's.
const containerPrefix = "hutch-"

func containerID(id string) string { return containerPrefix + id }

// validID keeps sandbox IDs safe as path elements and container names:
// 1 to 40 lower-case letters and digits. (Not a regexp: every process of
// the binary, the agent in each sandbox too, would compile it at start.)
func validID(id string) bool {
	if id == "" || len(id) > 40 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Probe reports whether the runtime binary is there and answers.
func (r *Runtime) Probe(ctx context.Context) backend.Health {
	h := backend.Health{Name: r.cfg.Name}
	// A binary being built is not used half written.
	if since, ok := building(r.cfg.Binary); ok {
		h.Pending, h.Reason = true, pendingReason(r.cfg.Binary, since)
		return h
	}
	path, err := exec.LookPath(r.cfg.Binary)
	if err != nil {
		h.Reason = fmt.Sprintf("%s not found: %s", r.cfg.Binary, r.cfg.Install)
		return h
	}
	h.Binary = path
	// #nosec G204 -- the runtime binary is the daemon's own configuration
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		h.Reason = fmt.Sprintf("%s --version: %v", path, err)
		return h
	}
	h.Version = parseVersion(string(out))
	if os.Geteuid() != 0 {
		h.Reason = "the daemon must run as root to create sandboxes"
		return h
	}
	if err := r.cfg.Disks.Probe(); err != nil {
		h.Reason = err.Error()
		return h
	}
	if r.cfg.UserNamespace {
		if err := r.probeUserNS(); err != nil {
			h.Reason = err.Error()
			return h
		}
	}
	h.Usable = true
	return h
}

// parseVersion takes "runc version 1.1.5+ds1\ncommit: …" to "1.1.5+ds1".
func parseVersion(out string) string {
	first, _, _ := strings.Cut(out, "\n")
	fields := strings.Fields(first)
	for i, f := range fields {
		if f == "version" && i+1 < len(fields) {
			return fields[i+1]
		}
	}
	return strings.TrimSpace(first)
}

// state is the opaque handle state: enough to find everything again.
type state struct {
	Dir string `json:"dir"`
}

func (r *Runtime) dir(id string) string { return filepath.Join(r.cfg.SandboxDir, id) }

// newDir makes sandbox id's directory (ErrAlreadyExists when it has one)
// and returns its handle: the start of a sandbox here, made or imported.
func (r *Runtime) newDir(id string) (backend.Handle, string, error) {
	if !validID(id) {
		return backend.Handle{}, "", errdefs.InvalidArgument("invalid sandbox id %q", id)
	}
	dir := r.dir(id)
	// #nosec G301 -- searched by sandboxes' roots in their user namespaces (see userns.go); each sandbox's own is 0700
	if err := os.MkdirAll(r.cfg.SandboxDir, 0o711); err != nil {
		return backend.Handle{}, "", fmt.Errorf("create sandbox dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return backend.Handle{}, "", errdefs.AlreadyExists("sandbox %s already exists here", id)
		}
		return backend.Handle{}, "", fmt.Errorf("create sandbox dir: %w", err)
	}
	h := backend.Handle{ID: id, Backend: r.cfg.Name}
	h.State, _ = json.Marshal(state{Dir: dir})
	return h, dir, nil
}

// rollBack destroys what a failed make of sandbox h left (err not nil),
// even once ctx has ended.
func (r *Runtime) rollBack(ctx context.Context, h backend.Handle, err error, what string) {
	if err == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if derr := r.Destroy(cctx, h); derr != nil {
		r.log.Error(what, "sandbox_id", h.ID, "error", derr)
	}
}

// Create writes the bundle, mounts the root, starts the container and waits
// for its agent. Any failure removes what was made.
func (r *Runtime) Create(ctx context.Context, s backend.Spec) (h backend.Handle, err error) {
	h, dir, err := r.newDir(s.ID)
	if err != nil {
		return h, err
	}
	defer func() { r.rollBack(ctx, h, err, "roll back sandbox") }()
	// Before the rollback, which removes the network: every way out waits
	// for it to be made.
	network := r.makeNetworkBeside(ctx, s.ID)
	defer func() {
		if nerr := network.wait(); err == nil {
			err = nerr
		}
	}()
	if !r.linksAfterStart() { // made already: the bundle names it
		if err := network.wait(); err != nil {
			return h, err
		}
	}

	began := time.Now()
	var ns *userNS
	if r.cfg.UserNamespace {
		if ns, err = r.newUserNS(dir); err != nil {
			return h, fmt.Errorf("sandbox %s: %w", s.ID, err)
		}
	}
	layer := r.layout(s.ID)
	if err := r.prepare(ctx, &s, layer, ns); err != nil {
		return h, err
	}
	r.log.Debug("sandbox root mounted", "sandbox_id", s.ID, "duration", time.Since(began))
	if s.Restore != "" && r.cfg.Checkpoints {
		rerr := r.restore(ctx, h, s, layer, ns, s.Restore)
		if rerr == nil {
			return h, nil
		}
		// A snapshot's files are there as they were: start afresh on them.
		r.log.Warn("restore of a snapshot's memory failed; starting the sandbox afresh with its files", "sandbox_id", s.ID, "error", rerr)
		if err := r.deleteContainer(ctx, s.ID); err != nil {
			return h, errors.Join(rerr, err)
		}
	}
	return h, r.start(ctx, h, s, layer, ns, network)
}

// prepare makes what sandbox s runs on (its network aside): its disk, its
// root mounted (s.Binds become the mounts' own).
func (r *Runtime) prepare(ctx context.Context, s *backend.Spec, layer sandboxLayout, ns *userNS) (err error) {
	ctx, span := spans.Start(ctx, "disk and root")
	defer func() { spans.End(span, err) }()
	if _, err := r.cfg.Disks.Take(ctx, s.Limits.DiskBytes>>20, layer.disk); err != nil {
		return fmt.Errorf("disk of sandbox %s: %w", s.ID, err)
	}
	if s.Binds, err = layer.mount(s.RootDir, s.Binds, s.Files, ns); err != nil {
		return fmt.Errorf("mount root of sandbox %s: %w", s.ID, err)
	}
	return nil
}

// start writes the bundle of a sandbox whose root is mounted, runs its
// container and waits for its agent (when it listens itself). Under runc it
// links the container to its network, once network is made (nil: made
// before).
func (r *Runtime) start(ctx context.Context, h backend.Handle, s backend.Spec, layer sandboxLayout, ns *userNS, network *networkMaking) error {
	dir := layer.dir
	mounted := time.Now()
	logFile, err := r.writeBundle(s, layer, ns)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// run -d: the container outlives this call and this daemon. Its stdio is
	// the log file, so no pipe ties it to us.
	flags := []string{"run", "--detach", "--bundle", dir, "--pid-file", layer.pidFile()}
	var listener *os.File
	var extra []*os.File // the agent's descriptors from 3 on
	if !r.cfg.AgentListens {
		if listener, err = listenAgent(layer.socket); err != nil {
			return err
		}
		defer listener.Close() // the agent has its own copy
		// The listener becomes the agent's descriptor 3 (see specFor).
		extra = append(extra, listener)
	}
	if usesTenantCgroup(r.cfg, s) {
		tasks, err := MakeTenantCgroup(cgroupsPath(s.ID), s.Limits.Pids)
		if err != nil {
			return err
		}
		defer tasks.Close()          // the agent has its own copy, and closes it
		extra = append(extra, tasks) // descriptor 4, tenantTasksFD
	}
	if len(extra) > 0 {
		flags = append(flags, "--preserve-fds", strconv.Itoa(len(extra)))
	}
	cmd := r.command(ctx, append(flags, containerID(s.ID))...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = extra
	prepared := time.Now()
	_, run := spans.Start(ctx, "runtime.start")
	err = r.runStart(cmd, dir)
	spans.End(run, err)
	if err != nil {
		return fmt.Errorf("%s run: %w%s", r.cfg.Name, err, tailOf(filepath.Join(dir, "agent.log")))
	}
	if r.linksAfterStart() {
		if err := network.wait(); err != nil {
			return err
		}
		if err := r.linkStarted(s.ID, layer); err != nil {
			return err
		}
	}
	ran := time.Now()
	if err := layer.unmountIDMapped(); err != nil {
		return fmt.Errorf("sandbox %s: %w", s.ID, err)
	}
	if err := r.afterStart(s.ID, layer); err != nil {
		return fmt.Errorf("sandbox %s: %w", s.ID, err)
	}
	if r.cfg.AgentListens {
		// The agent listens some milliseconds from now (~25 under gVisor
		// here). What the create does next, and the caller's first call,
		// go on meanwhile; that call's dial waits for it.
		r.starting.Store(s.ID, time.Now().Add(r.cfg.AgentTimeout))
	}
	r.log.Debug("sandbox started", "sandbox_id", s.ID,
		"bundle", prepared.Sub(mounted), "runtime", ran.Sub(prepared), "after", time.Since(ran))
	return nil
}

// afterStart does what a sandbox's container needs once its runtime has
// started (or restored) it, before the first command: under gVisor, the
// host's OOM kills steered to processes, with headroom (see oom.go).
func (r *Runtime) afterStart(id string, layer sandboxLayout) error {
	if !r.cfg.StubsTakeOOMKills {
		return nil
	}
	pid, err := readPid(layer.pidFile())
	if err != nil {
		return err
	}
	if err := steerOOM(pid); err != nil {
		return err
	}
	if err := addHeadroom(filepath.Join("hutch", id)); err != nil {
		return fmt.Errorf("give gVisor's own memory headroom: %w", err)
	}
	return nil
}

// writeBundle writes the bundle's config.json for a sandbox whose root is
// mounted and opens its agent log, for the runtime's output.
func (r *Runtime) writeBundle(s backend.Spec, layer sandboxLayout, ns *userNS) (*os.File, error) {
	spec := specFor(s, r.cfg, layer.socketDir, ns)
	if err := r.linkCopied(s.ID, spec); err != nil {
		return nil, err
	}
	if r.cfg.MountsTmpfsAtTmp {
		tmp, err := layer.tmp()
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", s.ID, err)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/tmp", Type: "bind", Source: tmp,
			Options: []string{"bind", "rw", "nosuid", "nodev"}})
	}
	cfg, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode bundle config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(layer.dir, "config.json"), cfg, 0o600); err != nil {
		return nil, fmt.Errorf("write bundle config: %w", err)
	}
	// #nosec G304 -- a file in a sandbox directory Hutch made
	logFile, err := os.OpenFile(filepath.Join(layer.dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open agent log: %w", err)
	}
	return logFile, nil
}

// waitAgent waits until an agent that listens itself accepts connections,
// for AgentTimeout at most.
func (r *Runtime) waitAgent(ctx context.Context, h backend.Handle) error {
	conn, err := r.awaitAgent(ctx, h, time.Now().Add(r.cfg.AgentTimeout))
	if err != nil {
		return err
	}
	return conn.Close()
}

// awaitAgent dials an agent that listens itself until it answers, until
// the deadline or the end of its sandbox's process. It listens a few
// milliseconds after the runtime returns; a short fixed interval keeps the
// wait close to that (a poll is one open and one connect).
func (r *Runtime) awaitAgent(ctx context.Context, h backend.Handle, deadline time.Time) (_ net.Conn, err error) {
	ctx, span := spans.Start(ctx, "agent.ready")
	defer func() { spans.End(span, err) }()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(250 * time.Microsecond)
	defer tick.Stop()
	for polls := 0; ; polls++ {
		conn, err := r.dialAgent(ctx, h)
		if err == nil {
			r.starting.Delete(h.ID)
			return conn, nil
		}
		if polls%64 == 63 { // every ~20 ms
			if pid, perr := readPid(r.layout(h.ID).pidFile()); perr != nil || !inSandbox(pid, h.ID) {
				return nil, errdefs.Unavailable("the agent of sandbox %s stopped before it listened%s",
					h.ID, tailOf(filepath.Join(r.dir(h.ID), "agent.log")))
			}
		}
		select {
		case <-ctx.Done():
			return nil, errdefs.Unavailable("the agent of sandbox %s did not start listening: %v%s",
				h.ID, err, tailOf(filepath.Join(r.dir(h.ID), "agent.log")))
		case <-tick.C:
		}
	}
}

// listenAgent makes the agent's socket at path, listening, and returns it as
// a file to hand to the agent. This is socket activation, as systemd does
// it: connections made before the agent has started wait in the socket's
// queue, so Create returns as soon as the container runs and the sandbox's
// first call overlaps the agent's start-up. Nothing inside the sandbox can
// reach the socket's directory, which is only on the host.
func listenAgent(path string) (*os.File, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on agent socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // the socket stays for the agent
	f, err := ln.File()
	if cerr := ln.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return f, nil
}

// Recover checks that the sandbox's container still runs (or is paused).
func (r *Runtime) Recover(ctx context.Context, h backend.Handle) error {
	st, err := r.state(ctx, h.ID)
	if err != nil {
		return err
	}
	if st.Status != "running" && st.Status != "paused" {
		return errdefs.NotFound("container of sandbox %s is %s", h.ID, st.Status)
	}
	layer := r.layout(h.ID)
	if _, err := os.Stat(layer.snapshotting()); err != nil {
		return nil
	}
	// Caught mid-snapshot: thawed, and its agent listening, it runs as
	// before.
	if st.Status == "paused" {
		if err := r.Unpause(ctx, h); err != nil {
			return err
		}
	}
	if r.cfg.Checkpoints {
		if err := r.relisten(ctx, h); err != nil {
			return err
		}
	}
	r.log.Info("sandbox running again after a snapshot cut short", "sandbox_id", h.ID)
	return os.Remove(layer.snapshotting())
}

// containerState is the part of the runtime's `state` output Hutch reads.
type containerState struct {
	Status string `json:"status"` // "running", "stopped", …
	Pid    int    `json:"pid"`    // of the container's init, on the host
}

// state asks the runtime about a container; ErrNotFound when it does not know
// it.
func (r *Runtime) state(ctx context.Context, id string) (containerState, error) {
	var stderr bytes.Buffer
	cmd := r.command(ctx, "state", containerID(id))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "does not exist") {
			return containerState{}, errdefs.NotFound("container of sandbox %s does not exist", id)
		}
		return containerState{}, fmt.Errorf("%s state %s: %w: %s", r.cfg.Name, id, err, strings.TrimSpace(stderr.String()))
	}
	var st containerState
	if err := json.Unmarshal(out, &st); err != nil {
		return containerState{}, fmt.Errorf("decode %s state: %w", r.cfg.Name, err)
	}
	return st, nil
}

// DialAgent connects to the agent's socket. The socket's directory is
// writable from inside the sandbox, so whatever is at the socket's name is the
// sandbox's choice: a symlink planted there must not make the daemon connect
// to a host socket. The name is opened without following symlinks, checked to
// be a socket, and connected to through that very file (its /proc/self/fd
// link), so nothing can be swapped in between the check and the connect.
func (r *Runtime) DialAgent(ctx context.Context, h backend.Handle) (net.Conn, error) {
	conn, err := r.dialAgent(ctx, h)
	until, starting := r.starting.Load(h.ID)
	switch {
	case err == nil && starting:
		r.starting.Delete(h.ID)
	case err != nil && starting:
		return r.awaitAgent(ctx, h, until.(time.Time))
	}
	return conn, err
}

// dialAgent connects to a sandbox's agent once.
func (r *Runtime) dialAgent(ctx context.Context, h backend.Handle) (net.Conn, error) {
	// When the agent listens itself, the socket's directory is writable from
	// inside the sandbox: root there could put a symlink to a host socket in
	// the socket's place. So the path is opened without following symlinks,
	// checked to be a socket, and connected to through that very file.
	socket := r.layout(h.ID).socket
	fd, err := unix.Open(socket, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errdefs.Unavailable("the agent of sandbox %s is not listening", h.ID)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, errdefs.Unavailable("the agent socket of sandbox %s is not a socket", h.ID)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, errdefs.Unavailable("the agent of sandbox %s is not running", h.ID)
	}
	return conn, nil
}

// Destroy kills the container, deletes it from the runtime, unmounts its root
// and removes its directory. Each step tolerates what is already gone.
func (r *Runtime) Destroy(ctx context.Context, h backend.Handle) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	var errs []error
	if err := r.deleteContainer(ctx, h.ID); err != nil {
		errs = append(errs, err)
	}
	dir := r.dir(h.ID)
	layer := r.layout(h.ID)
	ids, hasIDs := mappingOf(dir)
	// Clones left by a create that stopped half-way, then the root.
	err := errors.Join(layer.unmountIDMapped(), layer.unmount())
	if err == nil {
		// What RemoveAll must not walk into.
		if points, merr := mountinfo.InTree(dir); merr != nil || len(points) > 0 {
			err = errors.Join(merr, fmt.Errorf("still mounted under sandbox %s: %v", h.ID, points))
		}
	}
	if err == nil {
		err = r.removeNetwork(h.ID)
	}
	if err != nil {
		errs = append(errs, err)
	} else if err := r.cfg.Disks.Release(layer.disk); err != nil {
		errs = append(errs, fmt.Errorf("release disk of sandbox %s: %w", h.ID, err))
	} else if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox dir: %w", err))
	} else if hasIDs {
		if err := r.ids.release(ids, dir); err != nil {
			errs = append(errs, fmt.Errorf("release id range of sandbox %s: %w", h.ID, err))
		}
	}
	return errors.Join(errs...)
}

// Capabilities: runc and gVisor's runsc do all a backend may, but gVisor
// mounts nothing into a running sandbox.
func (r *Runtime) Capabilities() backend.Capabilities {
	return backend.Capabilities{Pause: r, Suspend: r, Move: r, Network: r, Watch: r, WatchMemory: r, Kill: r, Snapshot: r, Build: r, Resize: r, Checkpoint: r, Attach: r.attacher(), GrowDisk: r, CPU: r}
}

// attacher is r as a backend.Attacher, or nil where it cannot mount into
// a running sandbox.
func (r *Runtime) attacher() backend.Attacher {
	if !r.cfg.LiveMounts {
		return nil
	}
	return r
}

// List returns the sandboxes this runtime has: containers in its state root
// and directories in the sandbox dir.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if validID(id) && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	out, err := r.command(ctx, "list", "--quiet").Output()
	if err != nil {
		return nil, fmt.Errorf("%s list: %w", r.cfg.Name, err)
	}
	for _, name := range strings.Fields(string(out)) {
		if id, ok := strings.CutPrefix(name, containerPrefix); ok {
			add(id)
		}
	}
	entries, err := os.ReadDir(r.cfg.SandboxDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read sandbox dir: %w", err)
	}
	for _, e := range entries {
		add(e.Name())
	}
	if r.cfg.NetnsDir != "" {
		netIDs, err := sandboxnet.List(r.cfg.NetnsDir)
		if err != nil {
			return nil, fmt.Errorf("read network namespace dir: %w", err)
		}
		for _, id := range netIDs {
			add(id)
		}
	}
	return ids, nil
}

// runStart runs cmd, the runtime's run or restore of the sandbox in dir:
// from a start namespace of its own where the runtime does.
func (r *Runtime) runStart(cmd *exec.Cmd, dir string) error {
	if r.cfg.DefaultTimerSlack {
		// Its processes keep the sandbox's time: they start with the
		// kernel's slack, not the daemon's (see timerslack).
		if err := timerslack.With(timerslack.Default, cmd.Start); err != nil {
			return err
		}
		return cmd.Wait()
	}
	if !r.cfg.StartNamespace {
		return cmd.Run()
	}
	err := r.starts.start(cmd, dir, []string{r.cfg.SandboxDir, r.cfg.StateRoot, r.cfg.AgentExe})
	if errors.Is(err, errNoStartNS) {
		return cmd.Run()
	}
	if err != nil {
		return err
	}
	return cmd.Wait()
}

func (r *Runtime) command(ctx context.Context, args ...string) *exec.Cmd {
	all := append(append([]string{"--root", r.cfg.StateRoot}, networkFlags(r.cfg)...), args...)
	// #nosec G204 -- the runtime binary and its flags are configuration; arguments are IDs checked by validID and paths Hutch made
	cmd := exec.CommandContext(ctx, r.executable(), all...)
	cmd.Args[0] = r.cfg.Binary // its name, also when run from a sealed copy
	return cmd
}

// waitExited waits until process pid has exited (gone, or a zombie waiting
// for the host's init to reap it).
func waitExited(ctx context.Context, pid int) error {
	stat := filepath.Join("/proc", strconv.Itoa(pid), "stat")
	deadline := time.Now().Add(10 * time.Second)
	for {
		// #nosec G304 -- a /proc path built from a pid
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // gone
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("init process %d still running after it was killed", pid)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// tailOf returns the end of a log file, for error messages.
func tailOf(path string) string {
	// #nosec G304 -- a log file in a sandbox directory Hutch made
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	const max = 512
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return ": " + strings.TrimSpace(string(b))
}

// Pause freezes the sandbox's container: runc with the cgroup freezer,
// runsc by stopping its kernel's tasks.
//
// On cgroup v1, runc's freeze is a game of chances that a busy host can
// lose ("unable to freeze": a task still freezing after runc's retries;
// runc thaws the cgroup again), so it is tried a few times.
func (r *Runtime) Pause(ctx context.Context, h backend.Handle) error {
	var err error
	for try := range freezeTries {
		if err = r.pauseCommand(ctx, h, "pause"); err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		if try == freezeTries-1 {
			break
		}
		// A moment for the busy host before the next try (CI's, with
		// ten daemons beside, lost three tries in a row; make test's,
		// six).
		select {
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// freezeTries is how many times Pause asks the runtime to freeze.
const freezeTries = 10

// Unpause thaws what Pause froze.
func (r *Runtime) Unpause(ctx context.Context, h backend.Handle) error {
	return r.pauseCommand(ctx, h, "resume")
}

func (r *Runtime) pauseCommand(ctx context.Context, h backend.Handle, verb string) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	return r.run(ctx, h.ID, verb, containerID(h.ID))
}

// run runs the runtime with args, a command on sandbox id's container:
// its stderr goes into the error, and a missing container is
// errdefs.ErrNotFound.
func (r *Runtime) run(ctx context.Context, id string, args ...string) error {
	var stderr bytes.Buffer
	cmd := r.command(ctx, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "does not exist") {
			return errdefs.NotFound("container of sandbox %s does not exist", id)
		}
		return fmt.Errorf("%s %s %s: %w: %s", r.cfg.Name, args[0], id, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Suspend deletes the sandbox's container (its processes and cgroups) and
// unmounts its root, keeping its directory and its disk, on which the
// writable layer is.
func (r *Runtime) Suspend(ctx context.Context, h backend.Handle, keepMemory bool) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	if _, err := os.Stat(r.dir(h.ID)); err != nil {
		return errdefs.NotFound("sandbox %s has no directory: %v", h.ID, err)
	}
	layer := r.layout(h.ID)
	if !keepMemory {
		if err := os.RemoveAll(layer.checkpoint()); err != nil {
			return err
		}
	} else if r.cfg.Checkpoints {
		// Memory and processes too, when the checkpoint works; else files
		// only, as without.
		if err := r.checkpoint(ctx, h.ID, layer); err != nil {
			r.log.Warn("checkpoint failed; the sandbox keeps its files only", "sandbox_id", h.ID, "error", err)
		}
	}
	if err := r.deleteContainer(ctx, h.ID); err != nil {
		return err
	}
	return errors.Join(layer.unmountIDMapped(), layer.unmount())
}

// Resume mounts a suspended sandbox's root again over its writable layer,
// with the same ids, and starts its container as Create does.
func (r *Runtime) Resume(ctx context.Context, h backend.Handle, s backend.Spec) (err error) {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	dir := r.dir(h.ID)
	if _, err := os.Stat(dir); err != nil {
		return errdefs.NotFound("sandbox %s has no directory to resume from: %v", h.ID, err)
	}
	layer := r.layout(h.ID)
	defer func() {
		if err != nil { // suspended again, as it was
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			err = errors.Join(err, r.deleteContainer(cctx, h.ID), layer.unmountIDMapped(), layer.unmount())
		}
	}()
	var ns *userNS
	if r.cfg.UserNamespace {
		ids, ok := mappingOf(dir)
		if !ok {
			return fmt.Errorf("sandbox %s: its directory has lost its id range", h.ID)
		}
		file, err := r.ids.userns(ids)
		if err != nil {
			return err
		}
		ns = &userNS{ids: ids, file: file}
	}
	if s.Binds, err = layer.mountOverlay(s.RootDir, s.Binds, ns); err != nil {
		return fmt.Errorf("mount root of sandbox %s: %w", h.ID, err)
	}
	// The last agent's socket goes: the new one (the daemon's, or the
	// agent's own) takes its name.
	if err := os.Remove(layer.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s.ID = h.ID
	if _, err := os.Stat(layer.checkpoint()); err == nil {
		rerr := r.restore(ctx, h, s, layer, ns, layer.checkpoint())
		if rerr == nil {
			return os.RemoveAll(layer.checkpoint())
		}
		// A fresh start keeps the files, as without a checkpoint.
		r.log.Warn("restore failed; starting the sandbox afresh with its files", "sandbox_id", h.ID, "error", rerr)
		if err := errors.Join(r.deleteContainer(ctx, h.ID), os.RemoveAll(layer.checkpoint())); err != nil {
			return errors.Join(rerr, err)
		}
	}
	return r.start(ctx, h, s, layer, ns, nil)
}

// frozen reports whether sandbox id's cgroup is frozen or freezing
// (Pause), on cgroup v1 or v2.
func frozen(id string) bool {
	for _, f := range []struct{ path, thawed string }{
		{filepath.Join(cgroupRoot, "freezer", "hutch", id, "freezer.state"), "THAWED"}, // v1
		{filepath.Join(cgroupRoot, "hutch", id, "cgroup.freeze"), "0"},                 // v2
	} {
		if b, err := os.ReadFile(f.path); err == nil { // #nosec G304 -- a cgroup file of a sandbox Hutch made
			return strings.TrimSpace(string(b)) != f.thawed
		}
	}
	return false
}

// deleteContainer kills a sandbox's container, deletes it from the runtime
// and removes its cgroups, waiting until its processes are gone. A missing
// container is fine.
func (r *Runtime) deleteContainer(ctx context.Context, id string) error {
	r.starting.Delete(id)
	// The init pid, to wait for, is the pid file's while that process is
	// the sandbox's (asking the runtime is a process more per delete).
	pid, err := readPid(r.layout(id).pidFile())
	if err != nil || !inSandbox(pid, id) {
		pid = 0
	}
	if r.cfg.DeletesByState && err == nil && !frozen(id) {
		// Once its init has ended (Kill's SIGKILL, or by itself), so has
		// every process of its pid namespace: what is left is the
		// runtime's state and the cgroups. (A frozen container's init
		// dies only once thawed: runc's delete does that.)
		if pid == 0 || r.Kill(ctx, backend.Handle{ID: id}) == nil && waitExited(ctx, pid) == nil {
			return errors.Join(removeCgroups(ctx, "hutch/"+id), os.RemoveAll(filepath.Join(r.cfg.StateRoot, containerID(id))))
		}
	}
	var stderr bytes.Buffer
	cmd := r.command(ctx, "delete", "--force", containerID(id))
	cmd.Stderr = &stderr
	var errs []error
	if err := cmd.Run(); err != nil && !strings.Contains(stderr.String(), "does not exist") {
		errs = append(errs, fmt.Errorf("%s delete %s: %w: %s", r.cfg.Name, id, err, strings.TrimSpace(stderr.String())))
	}
	if pid > 0 {
		// delete --force sends SIGKILL; the caller is promised that the
		// processes are gone, not dying.
		if err := waitExited(ctx, pid); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
		}
	}
	if err := removeCgroups(ctx, "hutch/"+id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
