package backendtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	agentv1 "github.com/hutchdev/hutch/api/agent/v1"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

func (s *suite) testProbe(t *testing.T) {
	h := s.backend.Probe(t.Context())
	if !h.Usable {
		t.Fatalf("Probe: not usable: %s", h.Reason)
	}
	if h.Name != s.backend.Name() {
		t.Errorf("Probe names %q, the backend is %q", h.Name, s.backend.Name())
	}
}

func (s *suite) testCreateAndExec(t *testing.T) {
	sb := s.create(t)
	if sb.handle.ID != sb.spec.ID || sb.handle.Backend != s.backend.Name() {
		t.Errorf("handle is %s of %q, want %s of %q", sb.handle.ID, sb.handle.Backend, sb.spec.ID, s.backend.Name())
	}
	if err := sb.agent.Health(t.Context()); err != nil {
		t.Fatalf("agent health: %v", err)
	}
	r := sb.sh(t, "echo hi; echo oops >&2")
	if r != (result{stdout: "hi\n", stderr: "oops\n"}) {
		t.Errorf("echo: got %+v", r)
	}
	// Threads: the C library makes them with clone3, or clone where that
	// fails with ENOSYS (see the runtime's seccomp profile).
	r = sb.sh(t, `python3 -c 'import threading; t = threading.Thread(target=print, args=("from a thread",)); t.start(); t.join()'`)
	if r.exitCode != 0 || r.stdout != "from a thread\n" {
		t.Errorf("a thread: exit %d, %q, %q", r.exitCode, r.stdout, r.stderr)
	}
}

func (s *suite) testExitCodes(t *testing.T) {
	sb := s.create(t)
	for script, want := range map[string]int{
		"true": 0, "false": 1, "exit 3": 3, "exit 255": 255, "no-such-command-here": 127,
	} {
		if got := sb.sh(t, script).exitCode; got != want {
			t.Errorf("%q exited %d, want %d", script, got, want)
		}
	}
}

// testEnv checks that Spec.Env reaches commands, values with spaces and
// empty ones included.
func (s *suite) testEnv(t *testing.T) {
	sb := s.create(t, func(spec *backend.Spec) {
		spec.Env = append(spec.Env, "CONFORMANCE_GREETING=hello  world", "CONFORMANCE_EMPTY=")
	})
	got := sb.mustSh(t, `printf '%s|%s|%s' "$CONFORMANCE_GREETING" "${CONFORMANCE_EMPTY-unset}" "${CONFORMANCE_NONE-unset}"`)
	if want := "hello  world||unset"; got != want {
		t.Errorf("environment: got %q, want %q", got, want)
	}
	// What a runtime gives the agent alone stays its own (see
	// agentv1.OneProcessor). A runtime whose agent inherits this test's
	// environment may pass on a GOMAXPROCS set here, and only that.
	got = sb.mustSh(t, `printf '%s|%s' "${GOMAXPROCS-unset}" "${`+agentv1.OneProcessor+`-unset}"`)
	gomaxprocs, mark, _ := strings.Cut(got, "|")
	if own, ok := os.LookupEnv("GOMAXPROCS"); mark != "unset" || gomaxprocs != "unset" && !(ok && gomaxprocs == own) {
		t.Errorf("the agent's own environment reached a command: GOMAXPROCS|%s = %q, want unset|unset", agentv1.OneProcessor, got)
	}
}

// testSpecFiles checks that Spec.Files are in the sandbox with their
// content, mode and owner: the user's own file readable, root's not.
func (s *suite) testSpecFiles(t *testing.T) {
	sb := s.create(t, func(spec *backend.Spec) {
		files := map[string]backend.File{
			"/home/user/conformance":           {Dir: true, Mode: 0o750, UID: 1000, GID: 1000},
			"/home/user/conformance/greeting":  {Data: []byte("hello from the spec\n"), Mode: 0o640, UID: 1000, GID: 1000},
			"/home/user/conformance/root-only": {Data: []byte("secret\n"), Mode: 0o600, UID: 0, GID: 0},
		}
		for p, f := range spec.Files {
			files[p] = f
		}
		spec.Files = files
	})
	got := sb.mustSh(t, "cd conformance && stat -c '%n %a %u %g' . greeting root-only && cat greeting")
	want := ". 750 1000 1000\ngreeting 640 1000 1000\nroot-only 600 0 0\nhello from the spec\n"
	if got != want {
		t.Errorf("spec files:\n got %q\nwant %q", got, want)
	}
	if r := sb.sh(t, "cat conformance/root-only"); r.exitCode == 0 {
		t.Errorf("the sandbox user read root's 0600 file: %q", r.stdout)
	}
}

// testAgentFiles writes a file through the agent and reads it back, both
// through the agent and with a command.
func (s *suite) testAgentFiles(t *testing.T) {
	sb := s.create(t)
	data := make([]byte, 300<<10) // over any single buffer on the way
	rand.Read(data)
	written, err := sb.agent.WriteFile(t.Context(), "uploads/blob.bin", "", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if written.Name != "blob.bin" {
		t.Errorf("WriteFile wrote %q, want blob.bin", written.Name)
	}
	rc, err := sb.agent.ReadFile(t.Context(), "uploads/blob.bin", "")
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile: %d bytes (error %v), want the %d written", len(got), err, len(data))
	}
	want := fmt.Sprintf("%d 1000\n", len(data))
	if got := sb.mustSh(t, "stat -c '%s %u' uploads/blob.bin"); got != want {
		t.Errorf("commands see the file as %q, want %q (size, owner)", got, want)
	}
	_, err = sb.agent.ReadFile(t.Context(), "no/such/file", "")
	wantKind(t, "ReadFile of a missing file", err, errdefs.ErrNotFound)
}

// testDestroy checks that Destroy stops the sandbox, forgets it and can be
// repeated, also for a sandbox that never was.
func (s *suite) testDestroy(t *testing.T) {
	sb := s.create(t)
	s.destroy(t, s.backend, sb.handle)
	s.destroy(t, s.backend, sb.handle)
	if conn, err := s.backend.DialAgent(t.Context(), sb.handle); err == nil {
		conn.Close()
		t.Error("DialAgent succeeded after Destroy")
	}
	if err := sb.agent.Health(t.Context()); err == nil {
		t.Error("the agent still answers after Destroy")
	}
	if s.listed(t, s.backend, sb.spec.ID) {
		t.Error("List has the sandbox after Destroy")
	}
	wantKind(t, "Recover after Destroy", s.backend.Recover(t.Context(), sb.handle), errdefs.ErrNotFound)
	_, err := s.backend.Stats(t.Context(), sb.handle)
	wantKind(t, "Stats after Destroy", err, errdefs.ErrNotFound)
	_, err = s.backend.LimitHits(t.Context(), sb.handle)
	wantKind(t, "LimitHits after Destroy", err, errdefs.ErrNotFound)

	// A sandbox the backend never made (the Manager destroys what a crash
	// left half-made) is gone already.
	s.destroy(t, s.backend, backend.Handle{ID: newID(), Backend: s.backend.Name()})
}

// testDuplicateID checks that creating a sandbox under a taken ID fails
// without harming the sandbox that has it.
func (s *suite) testDuplicateID(t *testing.T) {
	first := s.create(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	again := s.spec(t, func(spec *backend.Spec) { spec.ID = first.spec.ID })
	if h, err := s.backend.Create(ctx, again); err == nil {
		s.destroy(t, s.backend, h)
		t.Fatal("Create of a taken ID succeeded")
	} else {
		wantKind(t, "Create of a taken ID", err, errdefs.ErrAlreadyExists)
	}
	if got := first.mustSh(t, "echo still here"); got != "still here\n" {
		t.Errorf("the first sandbox answers %q after the failed create", got)
	}
}

// testCreateFailure checks that a Create failing halfway (here: writing the
// spec's files, after the backend made the sandbox's directory, disk and
// the rest) leaves nothing behind. The final checks of Run look further.
func (s *suite) testCreateFailure(t *testing.T) {
	spec := s.spec(t, func(spec *backend.Spec) {
		spec.Files = map[string]backend.File{"not/absolute": {Data: []byte("x"), Mode: 0o644}}
	})
	s.track(spec.ID)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if h, err := s.backend.Create(ctx, spec); err == nil {
		s.destroy(t, s.backend, h)
		t.Fatal("Create with a relative file path succeeded")
	}
	if s.listed(t, s.backend, spec.ID) {
		t.Error("List has the sandbox whose Create failed")
	}
}

func (s *suite) testList(t *testing.T) {
	a, b := s.create(t), s.create(t)
	ids, err := s.backend.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, id := range []string{a.spec.ID, b.spec.ID} {
		n := 0
		for _, listed := range ids {
			if listed == id {
				n++
			}
		}
		if n != 1 {
			t.Errorf("List has %s %d times, want once: %v", id, n, ids)
		}
	}
}

// testConcurrent creates, uses and destroys sandboxes at the same time (the
// Manager serialises calls per sandbox only): each must get its own.
func (s *suite) testConcurrent(t *testing.T) {
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			sb := s.create(t, func(spec *backend.Spec) {
				spec.Env = append(spec.Env, "CONFORMANCE_ID="+spec.ID)
			})
			got := sb.mustSh(t, `echo "$CONFORMANCE_ID" > id.txt && cat id.txt`)
			if want := sb.spec.ID + "\n"; got != want {
				t.Errorf("sandbox %s answers %q, want its own ID", sb.spec.ID, got)
			}
		})
	}
}

// testRecover checks that a restarted daemon's backend, given the handle it
// stored, reattaches to a running sandbox and reaches its agent.
func (s *suite) testRecover(t *testing.T) {
	sb := s.create(t)
	if got := sb.mustSh(t, "echo before > state.txt && cat state.txt"); got != "before\n" {
		t.Fatalf("before the restart: %q", got)
	}
	restarted := s.h.New(t)
	stored := backend.Handle{ID: sb.handle.ID, Backend: sb.handle.Backend, State: bytes.Clone(sb.handle.State)}
	if err := restarted.Recover(t.Context(), stored); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	after := &sandbox{spec: sb.spec, handle: stored, agent: s.client(t, restarted, stored)}
	if got := after.mustSh(t, "cat state.txt"); got != "before\n" {
		t.Errorf("after the restart the sandbox has %q, want its file", got)
	}
	if !s.listed(t, restarted, sb.spec.ID) {
		t.Error("the restarted backend does not list the sandbox")
	}
	s.destroy(t, restarted, stored)
	if s.listed(t, s.backend, sb.spec.ID) {
		t.Error("List has the sandbox after the restarted backend destroyed it")
	}
}

// testRecoverCrashed checks that a sandbox whose container stopped while the
// daemon was down is reported gone, and can still be destroyed.
func (s *suite) testRecoverCrashed(t *testing.T) {
	if s.h.Crash == nil {
		t.Skip("the harness cannot crash a sandbox")
	}
	sb := s.create(t)
	s.h.Crash(t, sb.handle)
	restarted := s.h.New(t)
	wantKind(t, "Recover of a crashed sandbox", restarted.Recover(t.Context(), sb.handle), errdefs.ErrNotFound)
	s.destroy(t, restarted, sb.handle)
	if s.listed(t, restarted, sb.spec.ID) {
		t.Error("List has the crashed sandbox after Destroy")
	}
}
