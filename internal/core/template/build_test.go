package template

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// A build step needs a build backend that is usable and can build; without
// one, a Hutchfile's RUN says why and no template is made.
func TestBuildStepRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		configure func(*Config, *coretest.Core)
		want      string
	}{
		{"no build backend", func(*Config, *coretest.Core) {}, "which this daemon does not have"},
		{"unusable", func(cfg *Config, c *coretest.Core) {
			cfg.BuildBackend, cfg.BuildUnusable = c.Backend, "no user namespaces"
		}, "runtime fake is not usable on this host: no user namespaces"},
		// The fake makes no writable layer to apply.
		{"not a builder", func(cfg *Config, c *coretest.Core) { cfg.BuildBackend = c.Backend }, "runtime fake cannot run template build steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := coretest.Start(t)
			cfg := Config{Core: c.M, Store: c.DB, Templates: c.Templates}
			tt.configure(&cfg, c)
			s := New(cfg)
			commitTemplate(t, c.Templates, "base")
			_, err := s.Build(t.Context(), BuildRequest{Name: "app", Hutchfile: "FROM base\nRUN true\n"}, nil)
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build: %v, want a failed precondition saying %q", err, tt.want)
			}
			if _, err := c.Templates.Info("app"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("template app after the failed build: %v, want not found", err)
			}
			if ids, err := c.Backend.List(t.Context()); err != nil || len(ids) != 0 {
				t.Errorf("sandboxes left: %v, %v", ids, err)
			}
		})
	}
}

// A step's output is told line by line, whatever its chunks, and the last
// lines end the error of a failed step.
func TestLineWriter(t *testing.T) {
	t.Parallel()
	var heard []string
	w := &lineWriter{emit: func(s string) { heard = append(heard, s) }}
	for _, chunk := range []string{"one\ntw", "o\r\n\n  three  ", "\n", "four"} {
		w.write([]byte(chunk))
	}
	w.flush()
	if want := []string{"one", "two", "three", "four"}; !slices.Equal(heard, want) {
		t.Errorf("lines: %q, want %q", heard, want)
	}
	for i := range 2 * tailLines {
		w.write([]byte(strings.Repeat("x", i+1) + "\n"))
	}
	tail := strings.Split(strings.TrimPrefix(w.tail(), ": "), "\n")
	if len(tail) != tailLines || tail[len(tail)-1] != strings.Repeat("x", 2*tailLines) {
		t.Errorf("tail: %d lines ending %q, want the last %d", len(tail), tail[len(tail)-1], tailLines)
	}
	if got := (&lineWriter{}).tail(); got != "" {
		t.Errorf("tail of no output: %q", got)
	}
}

// writer is the fake backend as a build backend whose steps each leave
// a file of size bytes in the root.
type writer struct {
	*fake.Backend
	size  int
	steps int
}

// Capabilities: the fake's, and it runs build steps.
func (w *writer) Capabilities() backend.Capabilities {
	c := w.Backend.Capabilities()
	c.Build = w
	return c
}

func (w *writer) ListenIn(context.Context, backend.Handle, string) (net.Listener, error) {
	return nil, errdefs.NotImplemented("no network for the writer's steps")
}

func (w *writer) Export(_ context.Context, _ backend.Handle, dir string) error {
	w.steps++
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("step-%d", w.steps)), bytes.Repeat([]byte{1}, w.size), 0o644)
}

// What a workspace's build steps add to the root is bounded: a step runs
// with what is left of the bound as its disk, a step with too little left
// is refused, and a step that leaves more than the bound fails the build.
// The root it started from does not count.
func TestBuildStepsDiskBound(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	w := &writer{Backend: c.Backend, size: 40 << 20}
	s := New(Config{Core: c.M, Store: c.DB, Templates: c.Templates, BuildBackend: w})
	ctx := t.Context()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "before"), bytes.Repeat([]byte{1}, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run := s.runner(buildLimits{workspace: "acme", maxBytes: 100 << 20, why: "the test's bound"})
	step := rootfs.RunStep{Argv: []string{"true"}}
	if err := run(ctx, root, step); err != nil {
		t.Fatalf("a step within the bound: %v", err)
	}
	if err := run(ctx, root, step); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "the test's bound") {
		t.Errorf("a step with 60 MiB left: %v, want resource exhausted", err)
	}
	w.size = 120 << 20
	run = s.runner(buildLimits{workspace: "acme", maxBytes: 100 << 20, why: "the test's bound"})
	if err := run(ctx, t.TempDir(), step); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a step that left more than the bound: %v, want resource exhausted", err)
	}
	if ids, err := c.Backend.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("sandboxes left: %v, %v", ids, err)
	}
}
