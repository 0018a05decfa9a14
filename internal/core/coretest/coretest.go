// Package coretest starts the lifecycle core for the tests of the
// services beside it (exec and processes, files, tools, templates) and of
// its hooks: a Manager over a real SQLite store, a real template store and
// the fake backend, whose sandboxes are real agents without isolation,
// with the quota keeper, the network plane and the processes' keeper as
// its hooks, as the daemon has them.
//
// A test package that uses it runs the fake's agent from its TestMain:
//
//	func TestMain(m *testing.M) {
//		if code, ran := fake.Main(); ran {
//			os.Exit(code)
//		}
//		goleak.VerifyTestMain(m)
//	}
package coretest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/core/volume"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// Core is a started Manager and what it stands on.
type Core struct {
	M         *core.Manager
	DB        *sqlite.DB
	Backend   *fake.Backend
	Templates *rootfs.Store
	Quotas    *quota.Keeper
	Networks  *network.Plane
	Processes *processes.Keeper
}

// Start starts a core whose state lives in the test's temporary
// directories; it is closed when the test ends. configure may change its
// Config before it starts. The fake's agent runs commands as the sandbox
// user, which needs root: without it the test is skipped.
func Start(t *testing.T, configure ...func(*core.Config)) *Core {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the host template's home belongs to uid 1000, and the agent starts commands as that user")
	}
	templates, err := rootfs.Open(filepath.Join(t.TempDir(), "templates"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Core{DB: db, Backend: fake.New(fake.TempDir(t)), Templates: templates}
	cfg := core.Config{Store: db, Backends: []backend.Backend{c.Backend}, Default: fake.Name, Templates: templates}
	for _, f := range configure {
		f(&cfg)
	}
	// The hooks the daemon has, unless configure gave its own.
	now := time.Now
	if cfg.Clock != nil {
		now = cfg.Clock.Now
	}
	for _, h := range cfg.Hooks {
		switch h := h.(type) {
		case *quota.Keeper:
			c.Quotas = h
		case *network.Plane:
			c.Networks = h
		case *processes.Keeper:
			c.Processes = h
		}
	}
	if c.Quotas == nil {
		c.Quotas = quota.New(quota.Config{Store: db, Node: cfg.Node, Now: now})
		cfg.Hooks = append(cfg.Hooks, c.Quotas)
	}
	if c.Networks == nil {
		c.Networks = network.New(network.Config{Store: db, Now: now})
		cfg.Hooks = append(cfg.Hooks, c.Networks)
	}
	if c.Processes == nil {
		c.Processes = processes.New(db, nil)
		cfg.Hooks = append(cfg.Hooks, c.Processes)
	}
	if !slices.ContainsFunc(cfg.Hooks, func(h hook.Hook) bool { _, ok := h.(*volume.Mounts); return ok }) {
		cfg.Hooks = append(cfg.Hooks, &volume.Mounts{Store: db, Dir: filepath.Join(t.TempDir(), "volumes")})
	}
	if c.M, err = core.New(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.M.Close()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Create makes a sandbox with opts, failing the test if it cannot; it is
// deleted when the test ends, unless the test deleted it.
func (c *Core) Create(t *testing.T, opts create.Options) *store.Sandbox {
	t.Helper()
	sb, _, err := c.M.Create(t.Context(), opts)
	if err != nil {
		t.Fatalf("create a sandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := c.M.Delete(context.WithoutCancel(t.Context()), sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("delete sandbox %s: %v", sb.ID, err)
		}
	})
	return sb
}

// Workspace is sandbox id's workspace as its agent sees it: the fake has
// no mount namespace, so the sandbox's root is a directory on the host.
func (c *Core) Workspace(id string) string { return c.Backend.Root(id) + rootfs.Workspace }
