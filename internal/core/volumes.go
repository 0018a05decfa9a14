package core

import (
	"context"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Volumes are named directories on the host that outlive sandboxes (the
// volume service, internal/core/volume, makes and removes them), mounted into
// the sandboxes that ask for them at create, read-only or writable. A
// volume's files belong to the sandbox ids (the user is 1000): under runc
// each sandbox sees them through its own idmapped mount, as it sees its
// template.

// Volume accesses.
const (
	AccessNone = "none" // not mounted
	AccessRO   = "ro"
	AccessRW   = "rw"
)

// volumeMounts checks the volumes a create asks for and drops those with
// access none.
func (m *Manager) volumeMounts(ctx context.Context, asked []VolumeMount) ([]VolumeMount, error) {
	if len(asked) == 0 {
		return nil, nil
	}
	known, err := m.store.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	var out []VolumeMount
	for _, v := range asked {
		if !slices.ContainsFunc(known, func(k *store.Volume) bool { return k.Name == v.Name }) {
			name, _ := workspace.Split(v.Name) // as its workspace calls it
			return nil, errdefs.NotFound("volume %s not found (hutch volume create %s)", name, name)
		}
		switch v.Access {
		case AccessNone:
			continue
		case "":
			v.Access = AccessRW
		case AccessRO, AccessRW:
		default:
			return nil, errdefs.InvalidArgument("volume %s: access must be none, ro or rw, got %q", v.Name, v.Access)
		}
		if v.Path == "" {
			v.Path = "/mnt/" + v.Name
		}
		if !mountablePath(v.Path) {
			return nil, errdefs.InvalidArgument("volume %s: path %q must be absolute and clean, under %s or /mnt", v.Name, v.Path, rootfs.UserHome)
		}
		if slices.ContainsFunc(out, func(o VolumeMount) bool { return o.Path == v.Path }) {
			return nil, errdefs.InvalidArgument("two volumes at %s", v.Path)
		}
		out = append(out, v)
	}
	return out, nil
}

// mountablePath says whether a volume may be mounted at p: in the user's
// home (the workspace included) or under /mnt, not over the system.
func mountablePath(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p &&
		(strings.HasPrefix(p, rootfs.UserHome+"/") || strings.HasPrefix(p, "/mnt/"))
}

// volumeBinds are the binds of a sandbox's volumes.
func (m *Manager) volumeBinds(vols []VolumeMount) []backend.Bind {
	var binds []backend.Bind
	for _, v := range vols {
		binds = append(binds, backend.Bind{Source: VolumePath(m.volumeDir, v.Name), Destination: v.Path, Writable: v.Access == AccessRW})
	}
	return binds
}

// VolumePath is where volume name's files are, in dir, the daemon's volume
// directory (internal/core/volume makes and removes them there): what a sandbox
// that mounts it sees.
func VolumePath(dir, name string) string { return filepath.Join(dir, name, "data") }
