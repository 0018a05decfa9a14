package template

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// A snapshot is a template of the sandbox's files as they were; a fork is
// a snapshot and sandboxes made from it, each with the source's shape,
// env, metadata and background processes.
func TestSnapshotAndFork(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	src := c.Create(t, create.Options{Env: map[string]string{"GREETING": "hello"}, Metadata: map[string]string{"owner": "ann"}, MemoryMB: 256})
	if err := os.WriteFile(filepath.Join(c.Workspace(src.ID), "note"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, c, src.ID, &store.Process{Name: "sleeper", Argv: []string{"sleep", "600"}, Running: true, CreatedAt: time.Now().UTC()})

	snap, err := s.Snapshot(ctx, src.ID, "snap~default")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if snap.Source != rootfs.SourceSnapshot || snap.Sandbox != src.ID || !strings.HasPrefix(snap.Parent, rootfs.HostName+"@") {
		t.Errorf("the snapshot: %+v", snap)
	}
	tmpl, err := c.Templates.Get("snap~default")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(tmpl.RootDir, rootfs.Workspace, "note")); err != nil || string(b) != "kept\n" {
		t.Errorf("the snapshot's copy of the file: %q, %v", b, err)
	}

	forks, err := s.Fork(ctx, src.ID, 2, "")
	if err != nil || len(forks) != 2 {
		t.Fatalf("Fork: %v, %v", forks, err)
	}
	for _, r := range forks {
		f := r.Sandbox
		if f.Template != "fork-"+src.ID+"~default" || f.MemoryMB != 256 || f.Metadata["forked_from"] != src.ID || f.Metadata["owner"] != "ann" || f.State != store.Running {
			t.Errorf("fork %s: %+v", f.ID, f)
		}
		r, release, err := c.M.Acquire(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if env, err := r.CommandEnv(ctx, "", nil); err != nil || env["GREETING"] != "hello" {
			t.Errorf("fork %s's env: %v, %v", f.ID, env, err)
		}
		procs, err := processes.Running(ctx, r)
		release()
		if _, ok := procs["sleeper"]; err != nil || !ok {
			t.Errorf("fork %s's processes: %v, %v; want sleeper running", f.ID, procs, err)
		}
	}

	// The template of a fork in use is kept; each fork a new version.
	again, err := s.Fork(ctx, src.ID, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Sandbox.TemplateVersion == forks[0].Sandbox.TemplateVersion {
		t.Errorf("a second fork has the first's version %s", again[0].Sandbox.TemplateVersion)
	}
	if _, err := c.Templates.Version("fork-"+src.ID+"~default", forks[0].Sandbox.TemplateVersion); err != nil {
		t.Errorf("the version the first forks use: %v", err)
	}
	for _, sb := range []*store.Sandbox{forks[0].Sandbox, forks[1].Sandbox, again[0].Sandbox, src} {
		if err := c.M.Delete(ctx, sb.ID); err != nil {
			t.Error(err)
		}
	}
}

// startProcess starts background process p in sandbox id, in its
// workspace, recorded as the processes service does.
func startProcess(t *testing.T, c *coretest.Core, id string, p *store.Process) {
	t.Helper()
	p.SandboxID, p.Cwd = id, c.Workspace(id)
	r, release, err := c.M.Acquire(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := processes.Start(t.Context(), r, p); err != nil {
		t.Fatal(err)
	}
	if err := c.DB.PutProcess(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

// Snapshots are refused a name no template may have, or another kind of
// template's, and a sandbox that is not there.
func TestSnapshotRefused(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	sb := c.Create(t, create.Options{})
	commitTemplate(t, c.Templates, "built~default")
	tests := []struct {
		name, id, snapshot string
		kind               error
	}{
		{"the host template's name", sb.ID, rootfs.HostName, errdefs.ErrInvalidArgument},
		{"a bad name", sb.ID, "Not A Name", errdefs.ErrInvalidArgument},
		{"a built template's name", sb.ID, "built~default", errdefs.ErrConflict},
		{"a shared name", sb.ID, "snap", errdefs.ErrInvalidArgument},
		{"another workspace's name", sb.ID, "snap~other", errdefs.ErrInvalidArgument},
		{"no such sandbox", "nosuchsandbox", "snap~default", errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Snapshot(ctx, tt.id, tt.snapshot); !errors.Is(err, tt.kind) {
				t.Errorf("Snapshot(%s, %q): %v, want %v", tt.id, tt.snapshot, err, tt.kind)
			}
		})
	}
	for _, count := range []int{0, maxForks + 1} {
		if _, err := s.Fork(ctx, sb.ID, count, ""); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Fork of %d: %v, want invalid argument", count, err)
		}
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
}

// raceRounds is how many times each race runs.
const raceRounds = 12

// race runs the functions at once and waits for them.
func race(fns ...func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn()
		}()
	}
	close(start)
	wg.Wait()
}

// settled checks that sandbox id rests in a state of the table, and
// returns it.
func settled(t *testing.T, c *coretest.Core, id string) store.State {
	t.Helper()
	rec, err := c.M.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if !slices.Contains(store.States(), rec.State) || store.Transient(rec.State) {
		t.Fatalf("sandbox %s rests in %q (%s)", id, rec.State, rec.StateReason)
	}
	return rec.State
}

// expect fails the test unless err is nil or of one of the kinds.
func expect(t *testing.T, what string, err error, kinds ...error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, k := range kinds {
		if errors.Is(err, k) {
			return
		}
	}
	t.Errorf("%s: %v", what, err)
}

// Delete beside a snapshot or a fork: the sandbox is gone in the end,
// whichever came first, and nothing of it is left running (the core's
// TestRaceDelete races a pause).
func TestRaceDelete(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	others := map[string]func(id string) error{
		"snapshot": func(id string) error { _, err := s.Snapshot(ctx, id, "snap-"+id+"~default"); return err },
		"fork": func(id string) error {
			forks, err := s.Fork(ctx, id, 1, "")
			for _, r := range forks {
				f := r.Sandbox
				if got := settled(t, c, f.ID); got != store.Running {
					t.Errorf("fork %s is %s, want running", f.ID, got)
				}
				expect(t, "Delete fork", c.M.Delete(ctx, f.ID))
			}
			return err
		},
	}
	for name, other := range others {
		t.Run(name, func(t *testing.T) {
			for range raceRounds {
				sb := c.Create(t, create.Options{})
				race(
					func() { expect(t, "Delete", c.M.Delete(ctx, sb.ID)) },
					func() {
						expect(t, name, other(sb.ID), errdefs.ErrNotFound, errdefs.ErrFailedPrecondition, errdefs.ErrConflict)
					},
				)
				if _, err := c.M.Get(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("after Delete and %s: %v, want not found", name, err)
				}
				ids, err := c.Backend.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(ids, sb.ID) {
					t.Errorf("the backend still has %s", sb.ID)
				}
				if _, _, err := c.M.Acquire(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("Acquire of the deleted sandbox: %v, want not found", err)
				}
			}
		})
	}
}
