package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/backend"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/store"
	"github.com/hutchdev/hutch/internal/template"
)

// Volumes: named directories on the host that outlive sandboxes, mounted
// into those that ask for them, read-only or writable. A volume's files
// belong to the sandbox ids (the user is 1000): under runc each sandbox
// sees them through its own idmapped mount, as it sees its template.

// Volume accesses.
const (
	AccessNone = "none" // not mounted
	AccessRO   = "ro"
	AccessRW   = "rw"
)

// VolumeInfo is a volume and the sandboxes that mount it.
type VolumeInfo struct {
	Name      string
	CreatedAt time.Time
	Sandboxes []string
}

// volumeData is where volume name's files are.
func (m *Manager) volumeData(name string) string { return filepath.Join(m.volumeDir, name, "data") }

// CreateVolume makes an empty volume, its root the sandbox user's.
func (m *Manager) CreateVolume(ctx context.Context, name string) (VolumeInfo, error) {
	if err := template.CheckName(name); err != nil {
		return VolumeInfo{}, errdefs.InvalidArgument("volume %s", strings.TrimPrefix(err.Error(), "template "))
	}
	if m.volumeDir == "" {
		return VolumeInfo{}, errdefs.FailedPrecondition("this daemon has no volume directory")
	}
	v := &store.Volume{Name: name, CreatedAt: time.Now().UTC()}
	if err := m.store.CreateVolume(ctx, v); err != nil {
		return VolumeInfo{}, err
	}
	dir := filepath.Join(m.volumeDir, name)
	err := func() error {
		// #nosec G301 -- sandboxes' users reach the data through it
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		// #nosec G301 -- the sandbox user's home-like directory
		if err := os.Mkdir(m.volumeData(name), 0o755); err != nil {
			return err
		}
		return os.Chown(m.volumeData(name), template.UserUID, template.UserGID)
	}()
	if err != nil {
		return VolumeInfo{}, errors.Join(fmt.Errorf("make volume %s: %w", name, err),
			os.RemoveAll(dir), m.store.DeleteVolume(context.WithoutCancel(ctx), name))
	}
	m.log.Info("volume created", "volume", name)
	return VolumeInfo{Name: name, CreatedAt: v.CreatedAt}, nil
}

// Volumes lists the volumes with the sandboxes that mount them.
func (m *Manager) Volumes(ctx context.Context) ([]VolumeInfo, error) {
	vols, err := m.store.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	users, err := m.volumeUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]VolumeInfo, 0, len(vols))
	for _, v := range vols {
		out = append(out, VolumeInfo{Name: v.Name, CreatedAt: v.CreatedAt, Sandboxes: users[v.Name]})
	}
	return out, nil
}

// DeleteVolume removes a volume and its files; one that a sandbox mounts,
// running or suspended, is a conflict.
func (m *Manager) DeleteVolume(ctx context.Context, name string) error {
	users, err := m.volumeUsers(ctx)
	if err != nil {
		return err
	}
	if ids := users[name]; len(ids) > 0 {
		return errdefs.Conflict("volume %s is mounted by sandbox(es) %s: delete them first", name, strings.Join(ids, ", "))
	}
	if err := m.store.DeleteVolume(ctx, name); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(m.volumeDir, name)); err != nil {
		return fmt.Errorf("remove the files of volume %s: %w", name, err)
	}
	m.log.Info("volume deleted", "volume", name)
	return nil
}

// volumeUsers maps each volume to the sandboxes that mount it.
func (m *Manager) volumeUsers(ctx context.Context) (map[string][]string, error) {
	recs, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	users := map[string][]string{}
	for _, rec := range recs {
		for _, v := range rec.Volumes {
			users[v.Name] = append(users[v.Name], rec.ID)
		}
	}
	return users, nil
}

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
			return nil, errdefs.NotFound("volume %s not found (hutch volume create %s)", v.Name, v.Name)
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
			return nil, errdefs.InvalidArgument("volume %s: path %q must be absolute and clean, under %s or /mnt", v.Name, v.Path, template.UserHome)
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
		(strings.HasPrefix(p, template.UserHome+"/") || strings.HasPrefix(p, "/mnt/"))
}

// volumeBinds are the binds of a sandbox's volumes.
func (m *Manager) volumeBinds(vols []VolumeMount) []backend.Bind {
	var binds []backend.Bind
	for _, v := range vols {
		binds = append(binds, backend.Bind{Source: m.volumeData(v.Name), Destination: v.Path, Writable: v.Access == AccessRW})
	}
	return binds
}
