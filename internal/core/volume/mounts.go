package volume

import (
	"context"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Volume accesses.
const (
	AccessNone = "none" // not mounted
	AccessRO   = "ro"
	AccessRW   = "rw"
)

// Path is where volume name's files are, in dir, the daemon's volume
// directory: what a sandbox that mounts it sees.
func Path(dir, name string) string { return filepath.Join(dir, name, "data") }

// Mounts is the hook of the lifecycle kernel that mounts volumes into the
// sandboxes that ask for them at create: it checks a create's mounts
// (hook.Preparer) and binds each volume's files at its path, at the create
// and at every resume (hook.Binder). A volume's files belong to the
// sandbox ids (the user is 1000): under runc each sandbox sees them
// through its own idmapped mount, as it sees its template.
type Mounts struct {
	Store interface {
		ListVolumes(ctx context.Context) ([]*store.Volume, error)
	}
	// Dir is the daemon's volume directory.
	Dir string
}

// Name names the hook.
func (m *Mounts) Name() string { return "volumes" }

// Prepare checks the volumes a create asks for, fills in their defaults
// (writable, at /mnt/NAME) and drops those with access none.
func (m *Mounts) Prepare(ctx context.Context, c *create.Options) error {
	if len(c.Volumes) == 0 {
		return nil
	}
	known, err := m.Store.ListVolumes(ctx)
	if err != nil {
		return err
	}
	var out []store.VolumeMount
	for _, v := range c.Volumes {
		if !slices.ContainsFunc(known, func(k *store.Volume) bool { return k.Name == v.Name }) {
			name, _ := workspace.Split(v.Name) // as its workspace calls it
			return errdefs.NotFound("volume %s not found (hutch volume create %s)", name, name)
		}
		switch v.Access {
		case AccessNone:
			continue
		case "":
			v.Access = AccessRW
		case AccessRO, AccessRW:
		default:
			return errdefs.InvalidArgument("volume %s: access must be none, ro or rw, got %q", v.Name, v.Access)
		}
		if v.Path == "" {
			v.Path = "/mnt/" + v.Name
		}
		if !mountablePath(v.Path) {
			return errdefs.InvalidArgument("volume %s: path %q must be absolute and clean, under %s or /mnt", v.Name, v.Path, rootfs.UserHome)
		}
		if slices.ContainsFunc(out, func(o store.VolumeMount) bool { return o.Path == v.Path }) {
			return errdefs.InvalidArgument("two volumes at %s", v.Path)
		}
		out = append(out, v)
	}
	c.Volumes = out
	return nil
}

// mountablePath says whether a volume may be mounted at p: in the user's
// home (the workspace included) or under /mnt, not over the system.
func mountablePath(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p &&
		(strings.HasPrefix(p, rootfs.UserHome+"/") || strings.HasPrefix(p, "/mnt/"))
}

// Binds are the binds of a sandbox's volumes.
func (m *Mounts) Binds(c *create.Options) []backend.Bind {
	var binds []backend.Bind
	for _, v := range c.Volumes {
		binds = append(binds, backend.Bind{Source: Path(m.Dir, v.Name), Destination: v.Path, Writable: v.Access == AccessRW})
	}
	return binds
}
