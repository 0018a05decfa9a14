package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hutchdev/hutch/client"
)

// crashRounds is how many times TestCrashMatrix kills the daemon in each
// step: once here (make test), 20 times in make soak.
var crashRounds = flag.Int("crash-rounds", 1, "rounds of each step of TestCrashMatrix")

// crashStep is one step of the crash matrix: what is there before it, the
// call the daemon is killed in, and how long that call takes here (the
// kill comes at a random point of it).
type crashStep struct {
	name   string
	window time.Duration
	// prepare makes what the step acts on; its writes are acknowledged.
	prepare func(t *testing.T, c *crashCase)
	// call is the step, cut short by the kill or not.
	call func(ctx context.Context, c *crashCase) error
}

// crashCase is one round of a step: its daemon, the sandbox it acts on,
// and what was acknowledged before the kill.
type crashCase struct {
	d       *daemon
	runtime string
	sandbox string
	// acked are the files whose writes were answered, by path.
	acked map[string]string
	// maybe are files written by the cut call: after the restart each is
	// whole or absent.
	maybe map[string]string
	// template is the template the step made, if it made one, and probe
	// a command a sandbox of it runs.
	template string
	probe    []string
}

// crashSteps are the calls the daemon is killed in.
var crashSteps = []crashStep{
	{name: "create", window: 400 * time.Millisecond,
		call: func(ctx context.Context, c *crashCase) error {
			sb, err := c.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: c.runtime})
			if err == nil {
				c.sandbox = sb.ID
			}
			return err
		}},
	{name: "exec", window: 100 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			_, err := c.d.client.Exec(ctx, c.sandbox, client.ExecRequest{Command: "echo ran > ran.txt; sleep 0.05"})
			return err
		}},
	{name: "file write", window: 100 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			c.maybe["second.txt"] = strings.Repeat("second write\n", 20000)
			_, err := c.d.client.WriteFile(ctx, c.sandbox, "second.txt", strings.NewReader(c.maybe["second.txt"]))
			return err
		}},
	{name: "process start", window: 150 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			_, err := c.d.client.StartProcess(ctx, c.sandbox, client.StartProcessRequest{Name: "bg", Cmd: []string{"sleep", "600"}})
			return err
		}},
	{name: "suspend", window: 800 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			_, err := c.d.client.SuspendSandbox(ctx, c.sandbox)
			return err
		}},
	{name: "resume", window: 800 * time.Millisecond,
		prepare: func(t *testing.T, c *crashCase) {
			withSandbox(t, c)
			if _, err := c.d.client.SuspendSandbox(t.Context(), c.sandbox); err != nil {
				t.Fatal(err)
			}
		},
		call: func(ctx context.Context, c *crashCase) error {
			_, err := c.d.client.ResumeSandbox(ctx, c.sandbox)
			return err
		}},
	{name: "snapshot", window: 800 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			c.template, c.probe = "crash-snap", []string{"true"}
			_, err := c.d.client.SnapshotSandbox(ctx, c.sandbox, c.template)
			return err
		}},
	{name: "fork", window: 1500 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			_, err := c.d.client.ForkSandbox(ctx, c.sandbox, 1)
			return err
		}},
	{name: "delete", window: 100 * time.Millisecond, prepare: withSandbox,
		call: func(ctx context.Context, c *crashCase) error {
			return c.d.client.DeleteSandbox(ctx, c.sandbox)
		}},
	{name: "template build", window: 1500 * time.Millisecond,
		call: func(ctx context.Context, c *crashCase) error {
			f, err := os.Open(crashImage)
			if err != nil {
				return err
			}
			defer f.Close()
			c.template, c.probe = "crash-image", []string{"/bin/hello"}
			_, err = c.d.client.ImportTemplate(ctx, c.template, f)
			return err
		}},
}

// crashImage is an image archive for the template build step.
var crashImage string

// withSandbox makes the round's sandbox, with a file written and
// acknowledged.
func withSandbox(t *testing.T, c *crashCase) {
	t.Helper()
	sb := c.d.create(client.CreateSandboxRequest{Runtime: c.runtime})
	c.sandbox = sb.ID
	c.acked["first.txt"] = "acknowledged before the crash\n"
	if _, err := c.d.client.WriteFile(t.Context(), sb.ID, "first.txt", strings.NewReader(c.acked["first.txt"])); err != nil {
		t.Fatal(err)
	}
}

// TestCrashMatrix kills the daemon with SIGKILL at a random point of each
// step (create, exec, file write, process start, suspend, resume,
// snapshot, fork, delete, template build), starts it again, and checks
// that every sandbox is there and answers or is wholly gone, that no
// acknowledged write is lost, that a template is whole or absent, and, at
// the end, that nothing leaked. With -crash-rounds N each step is done N
// times, the runtimes taken in turn (make soak: 20).
func TestCrashMatrix(t *testing.T) {
	crashImage = filepath.Join(t.TempDir(), "image.tar")
	tag, err := name.NewTag("crash/hello:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(crashImage, tag, helloImage(t)); err != nil {
		t.Fatal(err)
	}
	runtimes := []string{"runc"}
	if runscBin != "" && *crashRounds > 1 {
		runtimes = append(runtimes, "gvisor")
	}
	for _, step := range crashSteps {
		t.Run(step.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t)
			for round := range *crashRounds {
				c := &crashCase{d: d, runtime: runtimes[round%len(runtimes)], acked: map[string]string{}, maybe: map[string]string{}}
				crashRound(t, step, c)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// crashRound is one round: prepare, call, kill at a random point, start
// again, check, and clear up for the next round.
func crashRound(t *testing.T, step crashStep, c *crashCase) {
	t.Helper()
	if step.prepare != nil {
		step.prepare(t, c)
	}
	done := make(chan error, 1)
	go func() { done <- step.call(context.Background(), c) }()
	time.Sleep(rand.N(step.window))
	c.d.kill()
	callErr := <-done
	c.d.start()
	ctx := t.Context()
	what := fmt.Sprintf("%s under %s, the call said %v", step.name, c.runtime, callErr)

	list, err := c.d.client.ListSandboxes(ctx)
	if err != nil {
		t.Fatalf("%s: list after the restart: %v", what, err)
	}
	for _, sb := range list {
		// There and answering: a call wakes a suspended or failed one.
		res, err := c.d.client.Exec(ctx, sb.ID, client.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: sandbox %s (%s: %s) is listed but does not answer: %v %+v", what, sb.ID, sb.State, sb.StateReason, err, res)
		}
	}
	// The round's sandbox (a create's only once acknowledged) is there,
	// but after a delete, which may have come before the kill or not.
	switch there := slices.ContainsFunc(list, func(sb client.Sandbox) bool { return sb.ID == c.sandbox }); {
	case there:
		checkFiles(t, what, c)
	case c.sandbox != "" && step.name != "delete":
		t.Errorf("%s: sandbox %s is gone", what, c.sandbox)
	}
	if c.template != "" {
		checkTemplate(t, what, c)
	}
	if left, _ := filepath.Glob(filepath.Join(c.d.dataDir, "templates", ".build-*")); len(left) > 0 {
		t.Errorf("%s: template builds left: %v", what, left)
	}
	// Cleared for the next round; the leak census comes at the end.
	for _, sb := range list {
		if err := c.d.client.DeleteSandbox(ctx, sb.ID); err != nil && !client.IsNotFound(err) {
			t.Errorf("%s: delete %s: %v", what, sb.ID, err)
		}
		c.d.sandboxIDs = append(c.d.sandboxIDs, sb.ID)
	}
	if c.template != "" {
		if err := c.d.client.DeleteTemplate(ctx, c.template); err != nil && !client.IsNotFound(err) {
			t.Errorf("%s: delete template %s: %v", what, c.template, err)
		}
	}
}

// checkFiles reads the sandbox's files back: each acknowledged write is
// there whole, each write the kill cut short is whole or absent.
func checkFiles(t *testing.T, what string, c *crashCase) {
	t.Helper()
	read := func(path string) (string, error) {
		r, err := c.d.client.ReadFile(t.Context(), c.sandbox, path)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	for path, want := range c.acked {
		if got, err := read(path); err != nil || got != want {
			t.Errorf("%s: acknowledged %s lost: %d bytes, %v", what, path, len(got), err)
		}
	}
	for path, want := range c.maybe {
		got, err := read(path)
		if client.IsNotFound(err) {
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %s is neither whole nor absent: %d bytes of %d, %v", what, path, len(got), len(want), err)
		}
	}
}

// checkTemplate: the step's template is whole (a sandbox made from it
// answers) or absent.
func checkTemplate(t *testing.T, what string, c *crashCase) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.d.client.GetTemplate(ctx, c.template); client.IsNotFound(err) {
		return
	} else if err != nil {
		t.Errorf("%s: template %s: %v", what, c.template, err)
		return
	}
	sb, err := c.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Template: c.template, Runtime: c.runtime})
	if err != nil {
		t.Errorf("%s: template %s is listed but makes no sandbox: %v", what, c.template, err)
		return
	}
	c.d.sandboxIDs = append(c.d.sandboxIDs, sb.ID)
	defer func() {
		if err := c.d.client.DeleteSandbox(context.WithoutCancel(ctx), sb.ID); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}()
	if res, err := c.d.client.Exec(ctx, sb.ID, client.ExecRequest{Cmd: c.probe}); err != nil || res.ExitCode != 0 {
		t.Errorf("%s: a sandbox of template %s does not run %v: %v %+v", what, c.template, c.probe, err, res)
	}
}
