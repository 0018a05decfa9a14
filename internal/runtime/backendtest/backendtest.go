// Package backendtest is the conformance suite every backend.Backend passes:
// lifecycle, exec and files through the agent, restart recovery, limits and
// isolation, written once and run against each backend (runc and gVisor in
// internal/runtime/oci, the fake in internal/runtime/fake).
//
// The suite talks to each sandbox's agent over Backend.DialAgent with the
// daemon's own agent client, as the Manager does. Paths it hands the agent are
// relative to the sandbox user's home ("/home/user", uid 1000, as every
// template has it), so that a backend without a root of its own (the fake)
// can pass too; the isolation tests, which need a real root, use absolute
// paths.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Harness is what the suite needs to know about a backend.
type Harness struct {
	// New returns the backend under test. Every call returns a new value over
	// the same state (runtime state, sandbox directories), as a restarted
	// daemon would make: the restart tests call it again.
	New func(t *testing.T) backend.Backend

	// Spec returns a spec the backend can create: its root, binds and
	// limits. The suite sets ID and Hostname and adds to Env and Files. The root
	// must have the sandbox user (uid 1000) with the home /home/user.
	Spec func(t *testing.T) backend.Spec

	// Crash stops a sandbox's container behind the backend's back, as a
	// crash would, and returns once it has stopped. Nil skips the test of
	// recovering a crashed sandbox.
	Crash func(t *testing.T, h backend.Handle)

	// AssertGone checks that nothing of the given destroyed sandboxes is
	// left on the host: processes, mounts, cgroups, files. Nil checks
	// only List.
	AssertGone func(t *testing.T, ids []string)

	// AgentLog returns the end of what a sandbox's agent wrote to its log
	// (a panic, or why it ended), for the message of a test whose command
	// stream broke off. Nil when the backend keeps none.
	AgentLog func(h backend.Handle) string

	// Isolates says a sandbox is a world of its own: its own hostname,
	// processes, files and network. False skips the isolation tests.
	Isolates bool

	// KeepsProcesses says a suspend keeps the sandbox's processes and their
	// memory, and the resume brings them back (gVisor's checkpoint); else
	// the resume finds them gone.
	KeepsProcesses bool

	// Limits says the backend enforces Spec.Limits and reports use in
	// Stats. False skips the limit tests.
	Limits bool

	// ExtraPids is what Stats' PidsLimit adds to Spec.Limits.Pids: room the
	// cgroup leaves for the runtime's own tasks (gVisor's).
	ExtraPids int64

	// UserNamespace says a sandbox's root is not the host's: its ids are a
	// range of host ids of its own, not shared with other sandboxes, and
	// the files of its root still belong to their owners inside.
	UserNamespace bool

	// CountsOOMKills says a command the memory limit kills is counted by
	// OOMKills, the sandbox living on. (Under gVisor the sandbox as a whole
	// is what the host's OOM killer hits.)
	CountsOOMKills bool

	// ListensIn says the daemon can listen in a sandbox's network (see
	// backend.Builder): not where the network is in the runtime's own
	// kernel.
	ListensIn bool

	// CountsPidsMax says forks refused at the process limit are counted
	// by LimitHits. (Under gVisor the limit is inside its kernel, which
	// the host cannot read.)
	CountsPidsMax bool

	// ProcessCgroup is the pids cgroup the sandbox's processes are in, as
	// their /proc/self/cgroup names it, when it is not the agent's (runc
	// on cgroup v1: a child of the agent's, "/sandbox").
	ProcessCgroup string

	// HostProcesses returns the host's processes that run sandbox h (runc:
	// its container's first process; gVisor: its kernel and its gofer), for
	// the test that each runs under a seccomp filter. Nil skips it.
	HostProcesses func(t *testing.T, h backend.Handle) []int
}

// Timeouts of one backend call and of one command.
const (
	callTimeout    = 60 * time.Second
	commandTimeout = 60 * time.Second
)

// Run runs the conformance suite against the backend h makes. Subtests run
// one after another and destroy every sandbox they create; at the end none of
// them may be left.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h, backend: h.New(t)}
	t.Run("Probe", s.testProbe)
	t.Run("CreateAndExec", s.testCreateAndExec)
	t.Run("ExitCodes", s.testExitCodes)
	t.Run("Env", s.testEnv)
	t.Run("SpecFiles", s.testSpecFiles)
	t.Run("AgentFiles", s.testAgentFiles)
	t.Run("Destroy", s.testDestroy)
	t.Run("DuplicateID", s.testDuplicateID)
	t.Run("CreateFailure", s.testCreateFailure)
	t.Run("List", s.testList)
	t.Run("Concurrent", s.testConcurrent)
	t.Run("Recover", s.testRecover)
	t.Run("RecoverCrashed", s.testRecoverCrashed)
	t.Run("Stats", s.testStats)
	t.Run("OOMKills", s.testOOMKills)
	t.Run("PidsMax", s.testPidsMax)
	t.Run("ProcessCgroup", s.testProcessCgroup)
	t.Run("DiskLimit", s.testDiskLimit)
	t.Run("Isolation", s.testIsolation)
	t.Run("Builder", s.testBuilder)
	t.Run("Pause", s.testPause)
	t.Run("Suspend", s.testSuspend)
	t.Run("Network", s.testNetwork)

	ids, err := s.backend.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, id := range ids {
		if slices.Contains(s.created, id) {
			t.Errorf("sandbox %s is still listed after its test destroyed it", id)
		}
	}
	if h.AssertGone != nil {
		h.AssertGone(t, s.created)
	}
}

// suite is one run of the suite against one backend.
type suite struct {
	h       Harness
	backend backend.Backend

	mu      sync.Mutex
	created []string // every sandbox ID made, for the final leak check
}

// sandbox is a sandbox a test made, with a client of its agent.
type sandbox struct {
	spec   backend.Spec
	handle backend.Handle
	agent  *agentclient.Client
}

// newID returns a fresh sandbox ID, valid for every backend: lower-case
// letters and digits, as the Manager's.
func newID() string { return randomHex() }

func randomHex() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// spec is the harness's spec for a new sandbox, named and edited.
func (s *suite) spec(t *testing.T, edits ...func(*backend.Spec)) backend.Spec {
	t.Helper()
	spec := s.h.Spec(t)
	spec.ID = newID()
	spec.Hostname = "box-" + spec.ID
	for _, edit := range edits {
		edit(&spec)
	}
	return spec
}

// create makes a sandbox, destroyed when the test ends.
func (s *suite) create(t *testing.T, edits ...func(*backend.Spec)) *sandbox {
	t.Helper()
	spec := s.spec(t, edits...)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	s.track(spec.ID)
	h, err := s.backend.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { s.destroy(t, s.backend, h) })
	return &sandbox{spec: spec, handle: h, agent: s.client(t, s.backend, h)}
}

// track records a sandbox ID for the final leak check.
func (s *suite) track(id string) {
	s.mu.Lock()
	s.created = append(s.created, id)
	s.mu.Unlock()
}

// client is an agent client connecting through be.
func (s *suite) client(t *testing.T, be backend.Backend, h backend.Handle) *agentclient.Client {
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return be.DialAgent(ctx, h) })
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// destroy destroys a sandbox, failing the test if that fails. It also runs
// at cleanup, when the test's context is done.
func (s *suite) destroy(t *testing.T, be backend.Backend, h backend.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := be.Destroy(ctx, h); err != nil {
		t.Errorf("Destroy %s: %v", h.ID, err)
	}
}

// listed reports whether List has id.
func (s *suite) listed(t *testing.T, be backend.Backend, id string) bool {
	t.Helper()
	ids, err := be.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return slices.Contains(ids, id)
}

// result is how a command ended.
type result struct {
	stdout, stderr string
	exitCode       int
}

// sh runs script with /bin/sh -c as the sandbox user and waits for it to
// end.
func (sb *sandbox) sh(t *testing.T, script string) result {
	t.Helper()
	return run(t, sb.agent, "", script)
}

// shAsRoot runs script as root in the sandbox.
func (sb *sandbox) shAsRoot(t *testing.T, script string) result {
	t.Helper()
	return run(t, sb.agent, "root", script)
}

// mustSh runs script and fails the test unless it exits 0.
func (sb *sandbox) mustSh(t *testing.T, script string) string {
	t.Helper()
	r := sb.sh(t, script)
	if r.exitCode != 0 {
		t.Fatalf("%q exited %d; stderr: %s", script, r.exitCode, r.stderr)
	}
	return r.stdout
}

// run runs script with /bin/sh -c through agent c, as user ("" for the
// agent's default user), without stdin.
func run(t *testing.T, c *agentclient.Client, user, script string) result {
	t.Helper()
	r, err := tryRun(t.Context(), c, user, script)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryRun is run that returns what went wrong instead of failing the test.
func tryRun(ctx context.Context, c *agentclient.Client, user, script string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	exe, err := c.Start(ctx, agentclient.Command{Argv: []string{"/bin/sh", "-c", script}, User: user})
	if err != nil {
		return result{}, fmt.Errorf("start %q: %w", script, err)
	}
	defer func() { _ = exe.Close() }() // the result is read already
	var stdout, stderr strings.Builder
	for {
		ev, err := exe.Recv()
		if err != nil {
			return result{}, fmt.Errorf("%q: the stream ended without an end event: %w", script, err)
		}
		switch {
		case ev.Exit != nil:
			return result{stdout: stdout.String(), stderr: stderr.String(), exitCode: ev.Exit.Code}, nil
		case ev.Stream == agentclient.Stdout:
			stdout.Write(ev.Data)
		default:
			stderr.Write(ev.Data)
		}
	}
}

// Processes lists the host's running processes whose command line, its
// arguments joined by spaces, contains s: for a harness's AssertGone.
func Processes(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		// A zombie has exited, and has no command line.
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if line := strings.ReplaceAll(string(cmdline), "\x00", " "); err == nil && strings.Contains(line, s) {
			out = append(out, e.Name()+": "+line)
		}
	}
	return out
}

// wantKind fails the test unless err is of kind.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: got error %v, want one of kind %v", what, err, kind)
	}
}
