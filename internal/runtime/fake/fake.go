// Package fake is a backend.Backend for tests: each sandbox is the real agent
// (internal/agent) running as a plain child process of the test, with no
// isolation and no limits. Exec and files therefore behave as in a real
// sandbox, a sandbox starts in milliseconds, and no runtime is needed. It
// passes the conformance suite (internal/runtime/backendtest) but for the
// isolation and limit tests, like Nomad's mock driver.
//
// The test binary is the agent: Create runs it again, and so does the agent
// to start its shims. The binary's TestMain must call Main first.
//
// Sandbox id has the directory Dir/id: its agent's socket, log and pid file,
// and root/, which stands for the sandbox's root filesystem. Spec.Files are
// written in root/, which also has /etc/passwd and /etc/group of its own
// giving the sandbox user (uid 1000) the home root/home/user, as the host
// template does at /home/user. There is no chroot: the agent and its
// commands see the host's filesystem, where the sandbox's path p is at
// Root(id)+p. Paths relative to the user's home mean the same in both.
//
// Spec.RootDir, Binds, Hostname and Limits are ignored. Stats and OOMKills
// report zeros. The fake needs root, as the agent does: it starts commands
// as uid 1000 and hands them their files.
package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/agent"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

var _ backend.Backend = (*Backend)(nil)

// Name is the fake's backend name.
const Name = "fake"

// Timeouts for an agent to start listening and to stop.
const (
	startTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
)

// Backend runs fake sandboxes in a directory. Values over the same
// directory see the same sandboxes, as a restarted daemon's backend would.
type Backend struct {
	dir string
	// BeforeDestroy, when set, is called at the start of every Destroy:
	// a test holds a teardown there.
	BeforeDestroy func(h backend.Handle)
}

// New returns a Backend keeping its sandboxes in dir (see TempDir).
func New(dir string) *Backend { return &Backend{dir: dir} }

func (b *Backend) Name() string { return Name }

// Root is where the host has the root filesystem of sandbox id.
func (b *Backend) Root(id string) string { return filepath.Join(b.sandboxDir(id), "root") }

func (b *Backend) sandboxDir(id string) string { return filepath.Join(b.dir, id) }
func (b *Backend) socket(id string) string     { return filepath.Join(b.sandboxDir(id), "agent.sock") }
func (b *Backend) pidFile(id string) string    { return filepath.Join(b.sandboxDir(id), "pid") }

// validID keeps an ID safe as a path element.
func validID(id string) bool {
	return id != "" && id == filepath.Base(id) && !strings.HasPrefix(id, ".")
}

func (b *Backend) Probe(context.Context) backend.Health {
	h := backend.Health{Name: Name, Usable: true}
	switch {
	case !mainCalled.Load():
		h.Usable, h.Reason = false, "the test binary's TestMain does not call fake.Main"
	case os.Geteuid() != 0:
		h.Usable, h.Reason = false, "the agent needs root to start commands as the sandbox user"
	}
	return h
}

// Create writes the sandbox's root, starts its agent and waits until the
// agent listens. On error it leaves nothing behind.
func (b *Backend) Create(ctx context.Context, s backend.Spec) (h backend.Handle, err error) {
	if !mainCalled.Load() {
		return backend.Handle{}, errdefs.FailedPrecondition("fake: the test binary's TestMain must call fake.Main: Create runs the binary as the agent")
	}
	if !validID(s.ID) {
		return backend.Handle{}, errdefs.InvalidArgument("invalid sandbox id %q", s.ID)
	}
	// #nosec G301 -- the sandbox user must reach its home below
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return backend.Handle{}, fmt.Errorf("create fake dir: %w", err)
	}
	// #nosec G301 -- likewise
	if err := os.Mkdir(b.sandboxDir(s.ID), 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return backend.Handle{}, errdefs.AlreadyExists("sandbox %s already exists", s.ID)
		}
		return backend.Handle{}, fmt.Errorf("create sandbox dir: %w", err)
	}
	h = backend.Handle{ID: s.ID, Backend: Name}
	defer func() {
		if err != nil {
			_ = b.Destroy(context.WithoutCancel(ctx), h) // the create error is what matters
		}
	}()
	root := b.Root(s.ID)
	if err := writeRoot(root); err != nil {
		return h, fmt.Errorf("write root of sandbox %s: %w", s.ID, err)
	}
	if err := writeFiles(root, s.Files); err != nil {
		return h, fmt.Errorf("write files of sandbox %s: %w", s.ID, err)
	}
	if err := b.startAgent(s); err != nil {
		return h, err
	}
	return h, b.waitAgent(ctx, h)
}

// startAgent starts the test binary as the sandbox's agent, with the spec's
// environment, and records its pid.
func (b *Backend) startAgent(s backend.Spec) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the test binary: %w", err)
	}
	log, err := os.Create(filepath.Join(b.sandboxDir(s.ID), "agent.log"))
	if err != nil {
		return err
	}
	defer log.Close() // the agent has its own copy
	// #nosec G204 -- the test binary, run as the agent
	cmd := exec.Command(exe, agentArg, b.sandboxDir(s.ID))
	cmd.Env = append([]string{"PATH=" + defaultPath, "HOME=" + filepath.Join(b.Root(s.ID), "root")}, s.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	// An agent must not outlive a test binary that dies before its
	// cleanups run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start agent of sandbox %s: %w", s.ID, err)
	}
	go func() { _ = cmd.Wait() }() // reaps it whenever it ends; Destroy waits by its pid
	if err := os.WriteFile(b.pidFile(s.ID), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		_ = cmd.Process.Kill() // without its pid file, Destroy could not find it
		return fmt.Errorf("record agent pid: %w", err)
	}
	return nil
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// waitAgent polls until the agent accepts connections, or has died.
func (b *Backend) waitAgent(ctx context.Context, h backend.Handle) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		conn, err := b.DialAgent(ctx, h)
		if err == nil {
			return conn.Close()
		}
		if !b.started(h.ID) {
			return errdefs.Unavailable("the agent of sandbox %s exited: %s", h.ID, b.logTail(h.ID))
		}
		select {
		case <-ctx.Done():
			return errdefs.Unavailable("the agent of sandbox %s did not start listening: %s", h.ID, b.logTail(h.ID))
		case <-time.After(time.Millisecond):
		}
	}
}

// Recover checks that the sandbox's agent still runs.
func (b *Backend) Recover(_ context.Context, h backend.Handle) error {
	if _, alive := b.agentPid(h.ID); !alive {
		return errdefs.NotFound("the agent of sandbox %s is not running", h.ID)
	}
	return nil
}

func (b *Backend) DialAgent(ctx context.Context, h backend.Handle) (net.Conn, error) {
	if !validID(h.ID) {
		return nil, errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", b.socket(h.ID))
	if err != nil {
		return nil, errdefs.Unavailable("the agent of sandbox %s is not running", h.ID)
	}
	return conn, nil
}

// Destroy stops the agent (SIGTERM: it kills its commands; SIGKILL if it
// lingers) and removes the sandbox's directory.
func (b *Backend) Destroy(_ context.Context, h backend.Handle) error {
	if !validID(h.ID) {
		return errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	if b.BeforeDestroy != nil {
		b.BeforeDestroy(h)
	}
	if err := b.stop(h.ID, syscall.SIGTERM); err != nil {
		return err
	}
	if err := os.RemoveAll(b.sandboxDir(h.ID)); err != nil {
		return fmt.Errorf("remove sandbox dir: %w", err)
	}
	return nil
}

// Kill kills the sandbox's agent with SIGKILL, as a crash would, and returns
// once it is gone. Its directory stays: the sandbox is stopped, not
// destroyed. For tests of what follows a crash.
func (b *Backend) Kill(id string) error { return b.stop(id, syscall.SIGKILL) }

// stop sends sig to the sandbox's agent, if it runs, and waits for it to be
// gone, killing it if it lingers.
func (b *Backend) stop(id string, sig syscall.Signal) error {
	pid, alive := b.agentPid(id)
	if !alive {
		return nil
	}
	for _, s := range []syscall.Signal{sig, syscall.SIGKILL} {
		_ = syscall.Kill(pid, s) // it may have just exited
		// A paused sandbox's agent is stopped (see Pause): continued,
		// it takes the signal, as a runtime's kill ends a frozen
		// container.
		_ = b.signalTree(id, syscall.SIGCONT)
		for deadline := time.Now().Add(stopTimeout); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if _, alive := b.agentPid(id); !alive {
				return nil
			}
		}
	}
	return fmt.Errorf("the agent of sandbox %s (pid %d) survived SIGKILL", id, pid)
}

// started reports whether the agent just started for sandbox id is still
// there: its process exists and has not exited. (Its command line is not
// the agent's yet between fork and exec, so agentPid would say no.)
func (b *Backend) started(id string) bool {
	data, err := os.ReadFile(b.pidFile(id))
	if err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(data)) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// agentPid returns the pid of the sandbox's agent while it runs. The pid
// file alone could name a pid since reused: the process must also have the
// command line of this sandbox's agent. An agent that has exited (a zombie
// until reaped) has none.
func (b *Backend) agentPid(id string) (int, bool) {
	if !validID(id) {
		return 0, false
	}
	data, err := os.ReadFile(b.pidFile(id))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(string(data))
	if err != nil {
		return 0, false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	want := "\x00" + agentArg + "\x00" + b.sandboxDir(id) + "\x00"
	return pid, err == nil && bytes.HasSuffix(cmdline, []byte(want))
}

// Stats reports zeros for a running sandbox: the fake measures nothing.
func (b *Backend) Stats(ctx context.Context, h backend.Handle) (backend.Stats, error) {
	return backend.Stats{}, b.Recover(ctx, h)
}

// LimitHits reports none for a running sandbox: the fake has no limits.
func (b *Backend) LimitHits(ctx context.Context, h backend.Handle) (backend.LimitHits, error) {
	return backend.LimitHits{}, b.Recover(ctx, h)
}

// Capabilities: the fake pauses, suspends and snapshots its sandboxes.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Pause: b, Suspend: b, Snapshot: b}
}

// List returns the sandboxes with a directory, running or not.
func (b *Backend) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(b.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read fake dir: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// logTail is the end of the agent's log, for errors.
func (b *Backend) logTail(id string) string {
	data, _ := os.ReadFile(filepath.Join(b.sandboxDir(id), "agent.log"))
	const max = 1 << 10
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return strings.TrimSpace(string(data))
}

// The sandbox user, as the templates' roots have it (userName and
// the rest: TestUserAsTemplatesHaveIt keeps them the same; a runtime does
// not import the template store).
const (
	userName  = "user"
	userUID   = 1000
	userGID   = 1000
	userHome  = "/home/user"
	workspace = userHome + "/workspace"
)

// rootDirs are the directories every fake root has, as the host template's
// root has them.
var rootDirs = []struct {
	path string
	mode os.FileMode
	uid  int
}{
	{"etc", 0o755, 0}, {"root", 0o700, 0}, {"tmp", os.ModeSticky | 0o777, 0}, {"home", 0o755, 0},
	{userHome, 0o755, userUID}, {workspace, 0o755, userUID},
}

// writeRoot makes a sandbox's root: its directories, and accounts whose
// homes are in it.
func writeRoot(root string) error {
	// #nosec G301 -- the sandbox user must reach its home below
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for _, d := range rootDirs {
		path := filepath.Join(root, d.path)
		if err := os.Mkdir(path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(path, d.mode); err != nil { // past the umask
			return err
		}
		if err := os.Lchown(path, d.uid, d.uid); err != nil {
			return err
		}
	}
	passwd := fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\n%s:x:%d:%d::%s:/bin/sh\n",
		filepath.Join(root, "root"), userName, userUID, userGID, filepath.Join(root, userHome))
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, userGID)
	// #nosec G306 -- account files every sandbox process reads
	return errors.Join(
		os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644),
		os.WriteFile(filepath.Join(root, "etc", "group"), []byte(group), 0o644))
}

// writeFiles writes the spec's files into root. Nothing else has written
// there yet, so no symlink can lead the writes out of it.
func writeFiles(root string, files map[string]backend.File) error {
	for _, p := range slices.Sorted(maps.Keys(files)) { // parents first
		f := files[p]
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return errdefs.InvalidArgument("file path %q must be absolute and clean", p)
		}
		path := filepath.Join(root, p)
		// #nosec G301 -- like the directories of a template
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		var err error
		switch {
		case f.Dir:
			if err = os.Mkdir(path, os.FileMode(f.Mode)); errors.Is(err, os.ErrExist) {
				err = nil
			}
		case f.Link != "":
			err = os.Symlink(f.Link, path)
		default:
			err = os.WriteFile(path, f.Data, os.FileMode(f.Mode))
		}
		if err != nil {
			return err
		}
		if err := os.Lchown(path, f.UID, f.GID); err != nil {
			return err
		}
		if f.Link != "" {
			continue
		}
		if err := os.Chmod(path, os.FileMode(f.Mode)); err != nil { // past the umask
			return err
		}
	}
	return nil
}

var _ backend.Pauser = (*Backend)(nil)

// Pause stops the agent and every process under it (SIGSTOP), as a freezer
// would, and returns once they are stopped: a signal is delivered on its
// own time, and a process between the kill and its stop may still answer.
func (b *Backend) Pause(ctx context.Context, h backend.Handle) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// A process the tree forked while it was being signalled got no
	// signal: the tree is signalled again until all of it is stopped.
	for {
		if err := b.signalTree(h.ID, syscall.SIGSTOP); err != nil {
			return err
		}
		running := b.runningInTree(h.ID)
		if running == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the processes of sandbox %s did not stop (%s): %w", h.ID, running, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// runningInTree names a thread of the sandbox's agent or of a process
// under it that is not stopped, and its state; "" when all are stopped (or
// gone).
func (b *Backend) runningInTree(id string) string {
	pid, alive := b.agentPid(id)
	if !alive {
		return ""
	}
	tree, err := agent.LiveDescendants(pid)
	if err != nil {
		return err.Error()
	}
	for _, p := range append([]int{pid}, tree...) {
		if running := runningThread(p); running != "" {
			return running
		}
	}
	return ""
}

// runningThread names a thread of process pid that is not stopped, and
// its state; "" when every one is (or the process is gone). A thread in an
// uninterruptible wait with SIGSTOP pending counts as stopped: it stops
// before it runs a user instruction again. A process that vforked a child
// the stop reached before its exec is one: it waits for the child, stopped,
// until SIGCONT (the agent's fork/exec and dash's commands are vforks).
func runningThread(pid int) string {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return ""
	}
	for _, task := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, task.Name())
		// #nosec G304 -- a /proc path built from a pid and a task id
		b, err := os.ReadFile(dir + "stat")
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return fmt.Sprintf("thread %s of process %d: unreadable state", task.Name(), pid)
		}
		switch state := b[i+2]; {
		case state == 'T' || state == 't' || state == 'Z' || state == 'X':
		case state == 'D' && stopPending(dir):
		default:
			return fmt.Sprintf("thread %s of process %d: state %c", task.Name(), pid, state)
		}
	}
	return ""
}

// stopPending reports whether SIGSTOP waits for the thread whose /proc
// directory is dir (sent to it, or to its process).
func stopPending(dir string) bool {
	// #nosec G304 -- a /proc path built from a pid and a task id
	b, err := os.ReadFile(dir + "status")
	if err != nil {
		return false
	}
	const bit = 1 << (syscall.SIGSTOP - 1)
	for line := range strings.Lines(string(b)) {
		name, hex, ok := strings.Cut(strings.TrimSpace(line), ":\t")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(hex, 16, 64); err == nil && mask&bit != 0 {
			return true
		}
	}
	return false
}

// Unpause continues what Pause stopped.
func (b *Backend) Unpause(_ context.Context, h backend.Handle) error {
	return b.signalTree(h.ID, syscall.SIGCONT)
}

// signalTree sends sig to the sandbox's agent and all its descendants.
func (b *Backend) signalTree(id string, sig syscall.Signal) error {
	pid, alive := b.agentPid(id)
	if !alive {
		return errdefs.NotFound("the agent of sandbox %s is not running", id)
	}
	tree, err := agent.LiveDescendants(pid)
	if err != nil {
		return err
	}
	for _, p := range append([]int{pid}, tree...) {
		_ = syscall.Kill(p, sig) // one may have just exited
	}
	return nil
}

var _ backend.Suspender = (*Backend)(nil)

// Suspend stops the agent and its commands; the sandbox's directory stays.
// It keeps no memory.
func (b *Backend) Suspend(_ context.Context, h backend.Handle, _ bool) error {
	if _, err := os.Stat(b.sandboxDir(h.ID)); err != nil {
		return errdefs.NotFound("sandbox %s has no directory: %v", h.ID, err)
	}
	return b.stop(h.ID, syscall.SIGTERM)
}

// Resume starts the agent again over the sandbox's directory.
func (b *Backend) Resume(ctx context.Context, h backend.Handle, s backend.Spec) error {
	if _, err := os.Stat(b.sandboxDir(h.ID)); err != nil {
		return errdefs.NotFound("sandbox %s has no directory to resume from: %v", h.ID, err)
	}
	_ = os.Remove(b.socket(h.ID)) // the last agent's; missing is fine
	s.ID = h.ID
	if err := b.startAgent(s); err != nil {
		return err
	}
	return b.waitAgent(ctx, h)
}

var _ backend.Snapshotter = (*Backend)(nil)

// Snapshot copies the sandbox's root over root while its processes are
// stopped (unless they are already), as a runtime applies a writable
// layer. It saves no memory.
func (b *Backend) Snapshot(ctx context.Context, h backend.Handle, root, _ string) (bool, error) {
	src := b.Root(h.ID)
	if _, err := os.Stat(src); err != nil {
		return false, errdefs.NotFound("sandbox %s has no root: %v", h.ID, err)
	}
	wasStopped := b.paused(h.ID)
	if !wasStopped {
		if err := b.Pause(ctx, h); err != nil {
			return false, err
		}
		defer func() { _ = b.Unpause(context.WithoutCancel(ctx), h) }()
	}
	// #nosec G204 -- paths of the fake's own directories
	if out, err := exec.CommandContext(ctx, "cp", "-a", src+"/.", root).CombinedOutput(); err != nil {
		return false, fmt.Errorf("copy root of sandbox %s: %w: %s", h.ID, err, out)
	}
	return false, nil
}

// paused reports whether the sandbox's agent is stopped (see Pause).
func (b *Backend) paused(id string) bool {
	pid, ok := b.agentPid(id)
	return ok && runningThread(pid) == ""
}
