package template

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/core/create"

	"go.uber.org/goleak"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/coretest"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// The service over a core on SQLite and the fake backend (coretest),
// whose sandboxes are real agents without isolation.

func TestMain(m *testing.M) {
	if code, ran := fake.Main(); ran {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// start starts a core and the service over it; configure changes the
// service's Config.
func start(t *testing.T, configure ...func(*Config)) (*coretest.Core, *Service) {
	t.Helper()
	c := coretest.Start(t)
	cfg := Config{Core: c.M, Store: c.DB, Templates: c.Templates, Quotas: c.Quotas, Processes: c.Processes}
	for _, f := range configure {
		f(&cfg)
	}
	return c, New(cfg)
}

// commitTemplate makes a new version of template name in the store (the
// fake makes its sandboxes' roots itself: an empty one does).
func commitTemplate(t *testing.T, s *rootfs.Store, name string) rootfs.Info {
	t.Helper()
	b, err := s.Begin(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Abort() }()
	if err := os.MkdirAll(b.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := b.Commit(rootfs.Info{Source: rootfs.SourceDebian})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// A template is listed with the number of sandboxes made from it, and kept
// while one is.
func TestTemplatesInUse(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	made := commitTemplate(t, c.Templates, "tools")
	sb := c.Create(t, create.Options{Template: "tools"})

	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != rootfs.HostName || list[1].Name != "tools" || list[1].Sandboxes != 1 {
		t.Fatalf("List: %+v, %v; want host, then tools with one sandbox", list, err)
	}
	if got, err := s.Get(ctx, "tools"); err != nil || got.Version != made.Version || got.Sandboxes != 1 {
		t.Errorf("Get: %+v, %v", got, err)
	}
	if err := s.Delete(ctx, "tools"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), sb.ID) {
		t.Errorf("Delete of a template in use: %v, want a conflict naming %s", err, sb.ID)
	}
	if err := c.M.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "tools"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, "tools"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want not found", err)
	}
	if err := s.Delete(ctx, rootfs.HostName); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Delete of the host template: %v, want invalid argument", err)
	}
}

// On a cluster's node, a delete withdraws the template from the other
// nodes while it is still here, before removing it: a node that looked at
// the store between the two would copy it back. This node's own look may
// remove it in between; the delete still succeeds.
func TestDeleteWithdrawsFirst(t *testing.T) {
	t.Parallel()
	var withdrawn []string
	c, s := start(t, func(cfg *Config) {
		cfg.Withdraw = func(_ context.Context, name string) error {
			withdrawn = append(withdrawn, name)
			if _, err := cfg.Templates.Info(name); err != nil {
				t.Errorf("%s withdrawn after its removal: %v", name, err)
			}
			if name == "synced" {
				return cfg.Templates.Remove(name) // as the node's sync would
			}
			return nil
		}
	})
	ctx := t.Context()
	commitTemplate(t, c.Templates, "tools")
	commitTemplate(t, c.Templates, "synced")
	for _, name := range []string{"tools", "synced"} {
		if err := s.Delete(ctx, name); err != nil {
			t.Errorf("Delete %s: %v", name, err)
		}
		if _, err := s.Get(ctx, name); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Get %s after Delete: %v, want not found", name, err)
		}
	}
	if err := s.Delete(ctx, "missing"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Delete of a template that is not there: %v, want not found", err)
	}
	if !slices.Equal(withdrawn, []string{"tools", "synced"}) {
		t.Errorf("withdrawn: %q, want tools and synced, once each", withdrawn)
	}
}

// Requests that mix what cannot go together, or name nothing that can be
// built, are refused before anything is made.
func TestBuildRefused(t *testing.T) {
	t.Parallel()
	c, s := start(t)
	ctx := t.Context()
	tests := []struct {
		name string
		req  BuildRequest
		kind error
	}{
		{"hutchfile with packages", BuildRequest{Name: "a", Hutchfile: "FROM base\n", Packages: []string{"jq"}}, errdefs.ErrInvalidArgument},
		{"hutchfile with an image", BuildRequest{Name: "a", Hutchfile: "FROM base\n", Image: "debian"}, errdefs.ErrInvalidArgument},
		{"a hutchfile that does not parse", BuildRequest{Name: "a", Hutchfile: "BREW coffee\n"}, errdefs.ErrInvalidArgument},
		{"a context too big", BuildRequest{Name: "a", Hutchfile: "FROM base\n", Context: make([]byte, rootfs.MaxContext+1)}, errdefs.ErrInvalidArgument},
		{"a hutchfile from a template not there", BuildRequest{Name: "a", Hutchfile: "FROM nothing\nRUN true\n"}, errdefs.ErrNotFound},
		{"image with packages", BuildRequest{Name: "a", Image: "debian", Packages: []string{"jq"}}, errdefs.ErrInvalidArgument},
		{"a bad name", BuildRequest{Name: "Not A Name"}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Build(ctx, tt.req, nil); !errors.Is(err, tt.kind) {
				t.Errorf("Build: %v, want %v", err, tt.kind)
			}
		})
	}
	if _, err := s.Import(ctx, "Not A Name", strings.NewReader(""), nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Import under a bad name: %v, want invalid argument", err)
	}
	if list, err := c.Templates.List(); err != nil || len(list) != 1 {
		t.Errorf("templates after refused builds: %+v, %v; want host alone", list, err)
	}
}
