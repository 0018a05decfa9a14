package core

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core/create"

	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/testclock"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// The Manager over a real SQLite store and the fake backend, whose
// sandboxes are real agents without isolation.

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	// The Manager owns goroutines (timers, watches, reaps, agent
	// connections): a closed one leaves none.
	goleak.VerifyTestMain(m)
}

// daemonState is what outlives a daemon process: its database, templates
// and sandboxes.
type daemonState struct {
	dbPath    string
	templates *rootfs.Store
	sandboxes string // the fake backend's directory
}

func newDaemonState(t *testing.T) *daemonState {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the host template's home belongs to uid 1000, and the agent starts commands as that user")
	}
	templates, err := rootfs.Open(filepath.Join(t.TempDir(), "templates"))
	if err != nil {
		t.Fatal(err)
	}
	return &daemonState{dbPath: filepath.Join(t.TempDir(), "hutch.db"), templates: templates, sandboxes: fake.TempDir(t)}
}

// testDaemon is one daemon process's Manager.
type testDaemon struct {
	m       *Manager
	db      *sqlite.DB
	backend *fake.Backend
	stopped bool
}

// start makes a Manager over the state and recovers it, as `hutch serve`
// does, with the hook that keeps background processes across suspends
// (the other hooks are tested in their packages); it is stopped when the
// test ends.
func (s *daemonState) start(t *testing.T, configure ...func(*Config)) *testDaemon {
	t.Helper()
	db, err := sqlite.Open(t.Context(), s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{db: db, backend: fake.New(s.sandboxes)}
	cfg := Config{Store: db, Backends: []backend.Backend{d.backend}, Default: fake.Name, Templates: s.templates,
		Hooks: []hook.Hook{processes.New(db, nil)}}
	for _, f := range configure {
		f(&cfg)
	}
	if d.m, err = New(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop ends the daemon; its sandboxes run on.
func (d *testDaemon) stop(t *testing.T) {
	if d.stopped {
		return
	}
	d.stopped = true
	d.m.Close()
	if err := d.db.Close(); err != nil {
		t.Error(err)
	}
}

// execRequest is a command for exec: an argv, or a shell command.
type execRequest struct {
	Cmd     []string
	Command string
	Stdin   *string
}

// execResult is how it ended.
type execResult struct{ ExitCode int }

// exec runs a command in the sandbox's workspace, as a service beside the
// core runs one (internal/core/exec: through Acquire, in the environment
// CommandEnv makes, the agent's errors through Running.Err), and returns
// its stdout. The fake's agent sees the workspace in the sandbox's root
// on the host.
func (d *testDaemon) exec(t *testing.T, id string, req execRequest) (string, execResult, error) {
	t.Helper()
	ctx := t.Context()
	r, release, err := d.m.Acquire(ctx, id)
	if err != nil {
		return "", execResult{}, err
	}
	defer release()
	env, err := r.CommandEnv(ctx, "", nil)
	if err != nil {
		return "", execResult{}, err
	}
	cmd := agentclient.Command{Argv: req.Cmd, Env: env, Cwd: d.backend.Root(id) + rootfs.Workspace, User: rootfs.UserName}
	if req.Command != "" {
		cmd.Argv = []string{"/bin/sh", "-c", req.Command}
	}
	if req.Stdin != nil {
		cmd.Stdin = []byte(*req.Stdin)
	}
	exe, err := r.Agent().Start(ctx, cmd)
	if err != nil {
		return "", execResult{}, r.Err(ctx, err)
	}
	defer func() { _ = exe.Close() }()
	var stdout strings.Builder
	for {
		ev, err := exe.Recv()
		switch {
		case err != nil:
			return "", execResult{}, r.Lost(ctx, err)
		case ev.Exit != nil:
			return stdout.String(), execResult{ExitCode: ev.Exit.Code}, nil
		case ev.Stream == agentclient.Stdout:
			stdout.Write(ev.Data)
		}
	}
}

// listed reports whether the backend still has sandbox id.
func (d *testDaemon) listed(t *testing.T, id string) bool {
	t.Helper()
	ids, err := d.backend.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(ids, id)
}

func (d *testDaemon) create(t *testing.T, opts create.Options) *store.Sandbox {
	t.Helper()
	sb, err := d.m.create(t.Context(), opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return sb
}

func TestCreateExecDelete(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	ctx := t.Context()
	sb := d.create(t, create.Options{Env: map[string]string{"GREETING": "hello"}})
	if sb.State != store.Running || sb.Backend != fake.Name {
		t.Errorf("created sandbox is %s on %q, want running on the fake", sb.State, sb.Backend)
	}
	// The sandbox's own files reached the backend.
	if b, err := os.ReadFile(d.backend.Root(sb.ID) + "/etc/hostname"); err != nil || string(b) != sb.ID+"\n" {
		t.Errorf("/etc/hostname of the sandbox: %q, %v", b, err)
	}

	out, res, err := d.exec(t, sb.ID, execRequest{Command: `echo "$GREETING from $(id -u)"; exit 3`})
	if err != nil || out != "hello from 1000\n" || res.ExitCode != 3 {
		t.Errorf("exec: %q, %+v, %v; want the create's env, the sandbox user and exit 3", out, res, err)
	}
	stdin := "piped in"
	if out, _, err := d.exec(t, sb.ID, execRequest{Cmd: []string{"cat"}, Stdin: &stdin}); err != nil || out != stdin {
		t.Errorf("cat of stdin: %q, %v", out, err)
	}

	if err := d.m.Delete(ctx, sb.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := d.m.Get(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want not found", err)
	}
	if _, _, err := d.exec(t, sb.ID, execRequest{Command: "true"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Exec after Delete: %v, want not found", err)
	}
	if d.listed(t, sb.ID) {
		t.Error("the backend still has the sandbox after Delete")
	}
}

// A sandbox whose agent dies (killed from outside, say) is found out by
// the next call, marked error, and keeps its files: the call after starts
// it again on them, saying so.
func TestDeadSandboxKeepsItsFiles(t *testing.T) {
	t.Parallel()
	d := newDaemonState(t).start(t)
	sb := d.create(t, create.Options{})
	if _, _, err := d.exec(t, sb.ID, execRequest{Command: "echo kept > note"}); err != nil {
		t.Fatal(err)
	}
	if err := d.backend.Kill(sb.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err := d.exec(t, sb.ID, execRequest{Command: "echo hi"})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "stopped") || !strings.Contains(err.Error(), "files are kept") {
		t.Errorf("exec with the agent dead: %v, want unavailable, saying the sandbox stopped and its files are kept", err)
	}
	rec, err := d.m.Get(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != store.Error || !strings.Contains(rec.StateReason, "agent stopped") {
		t.Errorf("sandbox is %s (%s), want error saying its agent stopped", rec.State, rec.StateReason)
	}
	out, _, err := d.exec(t, sb.ID, execRequest{Command: "cat note"})
	if err != nil || out != "kept\n" {
		t.Fatalf("exec after the error: %q, %v; want the file kept", out, err)
	}
	rec, _ = d.m.Get(t.Context(), sb.ID)
	if rec.State != store.Running || !strings.HasPrefix(rec.StateReason, "started again by a call after an error: ") {
		t.Errorf("after the exec: %s (%s), want running, started again after the error", rec.State, rec.StateReason)
	}
	if err := d.m.Delete(t.Context(), sb.ID); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// A restarted daemon reconnects to sandboxes that ran on, marks the ones
// that stopped meanwhile, and removes what a crash left half-made or
// unrecorded.
func TestRecoverAfterRestart(t *testing.T) {
	t.Parallel()
	state := newDaemonState(t)
	d := state.start(t)
	ctx := t.Context()
	live := d.create(t, create.Options{})
	if _, _, err := d.exec(t, live.ID, execRequest{Command: "echo kept > kept.txt"}); err != nil {
		t.Fatal(err)
	}
	crashed := d.create(t, create.Options{})
	// A create the daemon was in the middle of: recorded, made, not yet
	// marked running.
	now := time.Now().UTC()
	halfMade := &store.Sandbox{ID: "halfmade", Template: create.DefaultTemplate, Backend: fake.Name, State: store.Creating, CreatedAt: now, UpdatedAt: now}
	if err := d.db.CreateSandbox(ctx, halfMade); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{halfMade.ID, "unrecorded"} {
		if _, err := d.backend.Create(ctx, backend.Spec{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	d.stop(t)
	if err := d.backend.Kill(crashed.ID); err != nil {
		t.Fatal(err)
	}

	d = state.start(t)
	if out, _, err := d.exec(t, live.ID, execRequest{Command: "cat kept.txt"}); err != nil || out != "kept\n" {
		t.Errorf("exec in the recovered sandbox: %q, %v", out, err)
	}
	rec, err := d.m.Get(ctx, crashed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != store.Error || !strings.Contains(rec.StateReason, "stopped while the daemon was down") {
		t.Errorf("crashed sandbox is %s (%s), want error saying it stopped while the daemon was down", rec.State, rec.StateReason)
	}
	if _, err := d.m.Get(ctx, halfMade.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get of the half-made sandbox: %v, want not found", err)
	}
	// The crashed one keeps its files: a start brings it back.
	if _, err := d.m.Resume(ctx, crashed.ID); err != nil {
		t.Errorf("start of the crashed sandbox: %v", err)
	} else if out, _, err := d.exec(t, crashed.ID, execRequest{Command: "echo back"}); err != nil || out != "back\n" {
		t.Errorf("exec in the started crashed sandbox: %q, %v", out, err)
	}
	for _, id := range []string{halfMade.ID, "unrecorded"} {
		if d.listed(t, id) {
			t.Errorf("the backend still has sandbox %s after recovery", id)
		}
	}
	for _, id := range []string{live.ID, crashed.ID} {
		if err := d.m.Delete(ctx, id); err != nil {
			t.Errorf("Delete %s: %v", id, err)
		}
	}
}

func TestIdleSandboxIsDeleted(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	d := newDaemonState(t).start(t, withClock(clock))
	sb := d.create(t, create.Options{IdleTimeout: time.Minute, IdleAction: store.IdleDelete})
	d.tickAfter(t, clock, 59*time.Second)
	if _, err := d.m.Get(t.Context(), sb.ID); err != nil {
		t.Fatalf("a sandbox idle for 59 s of its minute: %v", err)
	}
	d.tickAfter(t, clock, time.Second)
	if _, err := d.m.Get(t.Context(), sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a sandbox idle for its minute: %v, want deleted", err)
	}
	if d.listed(t, sb.ID) {
		t.Error("the backend still has the idle sandbox after its record went")
	}
}

// By default an idle sandbox is suspended, on time, and a running command
// keeps it awake.
func TestIdleSandboxIsSuspended(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	d := newDaemonState(t).start(t, withClock(clock))
	busy := d.create(t, create.Options{IdleTimeout: time.Minute})
	idle := d.create(t, create.Options{IdleTimeout: time.Minute})
	slept := make(chan error, 1)
	go func() {
		_, _, err := d.exec(t, busy.ID, execRequest{Command: "while [ ! -e release ]; do sleep 0.05; done"})
		slept <- err
	}()
	waitFor(t, "the command to run", func() bool {
		inst := d.m.liveInstance(busy.ID)
		inst.mu.Lock()
		defer inst.mu.Unlock()
		return inst.running == 1
	})
	d.tickAfter(t, clock, 59*time.Second)
	if got, _ := d.m.Get(t.Context(), idle.ID); got.State != store.Running {
		t.Fatalf("idle for 59 s of its minute: %s", got.State)
	}
	d.tickAfter(t, clock, time.Second)
	got, err := d.m.Get(t.Context(), idle.ID)
	if err != nil || got.State != store.Suspended || got.StateReason != "idle for 1m0s" {
		t.Fatalf("idle for its minute: %+v, %v; want suspended, idle for 1m0s", got, err)
	}
	if got, _ := d.m.Get(t.Context(), busy.ID); got.State != store.Running {
		t.Errorf("the sandbox running a command is %s", got.State)
	}
	if _, _, err := d.exec(t, busy.ID, execRequest{Command: "touch release"}); err != nil {
		t.Fatal(err)
	}
	if err := <-slept; err != nil {
		t.Errorf("the long command: %v", err)
	}
	for _, id := range []string{busy.ID, idle.ID} {
		if err := d.m.Delete(t.Context(), id); err != nil {
			t.Error(err)
		}
	}
}
