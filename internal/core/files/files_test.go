package files_test

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/storage/store"

	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/files"
	"github.com/hutchdev/hutch/internal/runtime/fake"
)

// The file calls over a core on real SQLite and the fake backend, whose
// sandboxes are real agents without isolation: a sandbox's paths are the
// host's, so the tests name them under the fake's root (Core.Workspace).

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	// The core owns goroutines (timers, watches, agent connections): a
	// closed one leaves none.
	goleak.VerifyTestMain(m)
}

// newSandbox makes a sandbox, deleted when the test ends.
func newSandbox(t *testing.T, c *coretest.Core) *store.Sandbox {
	t.Helper()
	sb := c.Create(t, create.Options{})
	t.Cleanup(func() {
		if err := c.M.Delete(context.WithoutCancel(t.Context()), sb.ID); err != nil {
			t.Errorf("delete sandbox %s: %v", sb.ID, err)
		}
	})
	return sb
}

func readAll(t *testing.T, s *files.Service, id, p string) (string, error) {
	t.Helper()
	rc, err := s.ReadFile(t.Context(), id, p, "")
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// A file's life in a sandbox: written (its directories made), read,
// described, listed, moved, removed; a directory made.
func TestFileLife(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	s := files.New(c.M)
	ctx := t.Context()
	sb := newSandbox(t, c)
	ws := c.Workspace(sb.ID)

	written, err := s.WriteFile(ctx, sb.ID, ws+"/notes/note.txt", "", strings.NewReader("a note"))
	if err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if written.Path != ws+"/notes/note.txt" || written.Type != files.TypeRegular || written.Size != 6 || written.Owner != "user" {
		t.Errorf("WriteFile: %+v, want a regular file of 6 bytes owned by the sandbox user", written)
	}
	if got, err := readAll(t, s, sb.ID, ws+"/notes/note.txt"); err != nil || got != "a note" {
		t.Errorf("ReadFile: %q, %v", got, err)
	}
	if e, err := s.Stat(ctx, sb.ID, ws+"/notes", ""); err != nil || e.Type != files.TypeDir {
		t.Errorf("Stat of the directory WriteFile made: %+v, %v", e, err)
	}

	if e, err := s.MakeDir(ctx, sb.ID, ws+"/a/b", ""); err != nil || e.Type != files.TypeDir || e.Path != ws+"/a/b" {
		t.Errorf("MakeDir: %+v, %v", e, err)
	}
	moved, err := s.Move(ctx, sb.ID, ws+"/notes/note.txt", ws+"/a/b/note.txt", "")
	if err != nil || moved.Path != ws+"/a/b/note.txt" {
		t.Errorf("Move: %+v, %v", moved, err)
	}
	entries, err := s.ListDir(ctx, sb.ID, ws+"/a", "", 2)
	if err != nil {
		t.Fatalf("ListDir: %v", err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	if want := []string{ws + "/a/b", ws + "/a/b/note.txt"}; !slices.Equal(paths, want) {
		t.Errorf("ListDir two deep: %q, want %q", paths, want)
	}

	if err := s.Remove(ctx, sb.ID, ws+"/a", ""); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := s.Stat(ctx, sb.ID, ws+"/a/b/note.txt", ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat after Remove: %v, want not found", err)
	}
	if _, err := readAll(t, s, sb.ID, ws+"/missing"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("ReadFile of a missing file: %v, want not found", err)
	}
}

// Arguments a call refuses are refused before it looks for the sandbox,
// which here does not exist.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	s := files.New(c.M)
	ctx := t.Context()
	const id = "sb-missing"
	tests := []struct {
		name string
		call func() error
	}{
		{"read without a path", func() error { _, err := s.ReadFile(ctx, id, "", ""); return err }},
		{"write without a path", func() error { _, err := s.WriteFile(ctx, id, "", "", strings.NewReader("")); return err }},
		{"stat without a path", func() error { _, err := s.Stat(ctx, id, "", ""); return err }},
		{"remove without a path", func() error { return s.Remove(ctx, id, "", "") }},
		{"mkdir without a path", func() error { _, err := s.MakeDir(ctx, id, "", ""); return err }},
		{"list zero deep", func() error { _, err := s.ListDir(ctx, id, "/", "", 0); return err }},
		{"list 65 deep", func() error { _, err := s.ListDir(ctx, id, "/", "", 65); return err }},
		{"move without a source", func() error { _, err := s.Move(ctx, id, "", "b", ""); return err }},
		{"move without a destination", func() error { _, err := s.Move(ctx, id, "a", "", ""); return err }},
	}
	for _, name := range []string{"", ".", "..", "dir/file", "nul\x00"} {
		tests = append(tests, struct {
			name string
			call func() error
		}{"upload named " + name, func() error { _, err := s.Upload(ctx, id, name, "", strings.NewReader("")); return err }})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.call(); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("got %v, want invalid argument", err)
			}
		})
	}
	if _, err := s.Stat(ctx, id, "/", ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat in a sandbox that does not exist: %v, want not found", err)
	}
}

// A read holds its sandbox running until its stream is closed: a suspend
// meanwhile is refused. A file call wakes a suspended sandbox.
func TestReadHoldsTheSandbox(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	s := files.New(c.M)
	ctx := t.Context()
	sb := newSandbox(t, c)
	p := c.Workspace(sb.ID) + "/note.txt"
	if _, err := s.WriteFile(ctx, sb.ID, p, "", strings.NewReader("a note")); err != nil {
		t.Fatal(err)
	}

	rc, err := s.ReadFile(ctx, sb.ID, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.M.Halt(ctx, sb.ID, core.Halt{Reason: "test"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Suspend while a read is open: %v, want conflict", err)
	}
	if err := rc.Close(); err != nil {
		t.Error(err)
	}
	if _, err := c.M.Halt(ctx, sb.ID, core.Halt{Reason: "test"}); err != nil {
		t.Fatalf("Suspend after the read closed: %v", err)
	}

	if got, err := readAll(t, s, sb.ID, p); err != nil || got != "a note" {
		t.Errorf("ReadFile of a suspended sandbox: %q, %v", got, err)
	}
	if rec, err := c.M.Get(ctx, sb.ID); err != nil || rec.State != store.Running {
		t.Errorf("after the read: %+v, %v; want the sandbox woken", rec, err)
	}
}

// A file call, as any call, finds out that a sandbox's agent died: the
// sandbox is marked error, keeping its files, and the next call starts it
// again on them.
func TestDeadAgent(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	s := files.New(c.M)
	ctx := t.Context()
	sb := newSandbox(t, c)
	p := c.Workspace(sb.ID) + "/note.txt"
	if _, err := s.WriteFile(ctx, sb.ID, p, "", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	if err := c.Backend.Kill(sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stat(ctx, sb.ID, p, "")
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "files are kept") {
		t.Errorf("Stat with the agent dead: %v, want unavailable, saying the sandbox stopped and its files are kept", err)
	}
	if rec, err := c.M.Get(ctx, sb.ID); err != nil || rec.State != store.Error {
		t.Errorf("after the Stat: %+v, %v; want the sandbox marked error", rec, err)
	}
	if got, err := readAll(t, s, sb.ID, p); err != nil || got != "kept" {
		t.Errorf("ReadFile after the error: %q, %v; want the file kept", got, err)
	}
}
