// Package template provides the read-only roots sandboxes are made from. For
// now there is one, `host`: a skeleton root whose system directories are
// read-only binds of the host's.
package template

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/errdefs"
)

// Template is a root a sandbox is made from.
type Template struct {
	Name string
	// RootDir is the read-only root directory.
	RootDir string
	// Binds are host paths the sandbox also sees, read-only.
	Binds []backend.Bind
}

// The sandbox user every template has.
const (
	UserName  = "user"
	UserUID   = 1000
	UserGID   = 1000
	UserHome  = "/home/user"
	Workspace = UserHome + "/workspace"
)

// Store finds templates in a directory.
type Store struct {
	dir  string
	host Template
}

// Open prepares the template directory, making the host template if needed.
func Open(dir string) (*Store, error) {
	// #nosec G301 -- sandbox users must traverse template roots
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create template dir: %w", err)
	}
	host, err := ensureHost(filepath.Join(dir, "host"), "/")
	if err != nil {
		return nil, fmt.Errorf("prepare host template: %w", err)
	}
	return &Store{dir: dir, host: host}, nil
}

// Get returns a template by name.
func (s *Store) Get(name string) (Template, error) {
	if name == s.host.Name {
		return s.host, nil
	}
	return Template{}, errdefs.NotFound("template %q not found; available: %s", name, s.host.Name)
}

// ensureHost makes the host template's skeleton root under dir unless it is
// already there. hostRoot is "/" except in tests. Each layout of the host gets
// its own directory named by its hash, built beside and renamed into place:
// a crash never leaves half a template, and a root that running sandboxes use
// as their lower layer is never changed under them.
func ensureHost(dir, hostRoot string) (Template, error) {
	plan := hostPlan(hostRoot)
	final := filepath.Join(dir, plan.version())
	t := Template{Name: "host", RootDir: filepath.Join(final, "rootfs"), Binds: plan.binds}
	if _, err := os.Stat(final); err == nil {
		return t, nil
	}
	// #nosec G301 -- sandbox users must traverse template roots
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return t, err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return t, err
	}
	if err := plan.build(filepath.Join(tmp, "rootfs")); err != nil {
		_ = os.RemoveAll(tmp) // best effort: the build error is what matters
		return t, err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.RemoveAll(tmp) // best effort: the build error is what matters
		return t, err
	}
	return t, nil
}
