// Package volume keeps the volumes: named directories on the host that
// outlive sandboxes, mounted into those that ask for them, read-only or
// writable. A service beside the sandbox core, which makes, lists and
// removes them, and a hook of the core (Mounts), which checks the volumes
// a create asks for and binds them.
//
// The layout, under the daemon's volume directory:
//
//	<name>/        searchable by anyone (0711): sandboxes' users reach data through it
//	<name>/data/   the volume's files, its root the sandbox user's (1000)
package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Store is what the service keeps volumes in, and reads sandboxes' mounts
// from (store.Store has it).
type Store interface {
	CreateVolume(ctx context.Context, v *store.Volume) error
	ListVolumes(ctx context.Context) ([]*store.Volume, error)
	DeleteVolume(ctx context.Context, name string) error
	ListSandboxes(ctx context.Context) ([]*store.Sandbox, error)
}

// Info is a volume and the sandboxes that mount it.
type Info struct {
	Name      string
	CreatedAt time.Time
	Sandboxes []string
}

// Teardowns tell when a deleted sandbox is wholly gone (core.Manager
// does): until then it still mounts its volumes.
type Teardowns interface {
	AwaitTeardown(ctx context.Context, id string) error
}

// Service makes, lists and removes volumes.
type Service struct {
	store     Store
	teardowns Teardowns
	dir       string
	log       *slog.Logger
}

// New returns a Service over s keeping the volumes' files in dir ("": the
// daemon has none, and Create refuses); teardowns and log may be nil.
func New(s Store, teardowns Teardowns, dir string, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: s, teardowns: teardowns, dir: dir, log: log}
}

// Create makes an empty volume, its root the sandbox user's.
func (s *Service) Create(ctx context.Context, name string) (Info, error) {
	if err := rootfs.CheckName(name); err != nil {
		return Info{}, errdefs.InvalidArgument("volume %s", strings.TrimPrefix(err.Error(), "template "))
	}
	if s.dir == "" {
		return Info{}, errdefs.FailedPrecondition("this daemon has no volume directory")
	}
	v := &store.Volume{Name: name, CreatedAt: time.Now().UTC()}
	if err := s.store.CreateVolume(ctx, v); err != nil {
		return Info{}, err
	}
	dir, data := filepath.Join(s.dir, name), Path(s.dir, name)
	err := func() error {
		// #nosec G301 -- sandboxes' users reach the data through it
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		// #nosec G301 -- the sandbox user's home-like directory
		if err := os.Mkdir(data, 0o755); err != nil {
			return err
		}
		return os.Chown(data, rootfs.UserUID, rootfs.UserGID)
	}()
	if err != nil {
		return Info{}, errors.Join(fmt.Errorf("make volume %s: %w", name, err),
			os.RemoveAll(dir), s.store.DeleteVolume(context.WithoutCancel(ctx), name))
	}
	s.log.Info("volume created", "volume", name)
	return Info{Name: name, CreatedAt: v.CreatedAt}, nil
}

// List lists the volumes with the sandboxes that mount them.
func (s *Service) List(ctx context.Context) ([]Info, error) {
	vols, err := s.store.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	users, err := s.users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(vols))
	for _, v := range vols {
		out = append(out, Info{Name: v.Name, CreatedAt: v.CreatedAt, Sandboxes: users[v.Name]})
	}
	return out, nil
}

// Delete removes a volume and its files; one that a sandbox mounts,
// running or suspended, is a conflict. A sandbox deleted a moment ago
// mounts it until its teardown ends: that is waited for.
func (s *Service) Delete(ctx context.Context, name string) error {
	users, err := s.users(ctx)
	if err != nil {
		return err
	}
	if ids := users[name]; len(ids) > 0 && s.teardowns != nil {
		for _, id := range ids {
			if err := s.teardowns.AwaitTeardown(ctx, id); err != nil {
				return err
			}
		}
		if users, err = s.users(ctx); err != nil {
			return err
		}
	}
	if ids := users[name]; len(ids) > 0 {
		return errdefs.Conflict("volume %s is mounted by sandbox(es) %s: delete them first", name, strings.Join(ids, ", "))
	}
	if err := s.store.DeleteVolume(ctx, name); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
		return fmt.Errorf("remove the files of volume %s: %w", name, err)
	}
	s.log.Info("volume deleted", "volume", name)
	return nil
}

// users maps each volume to the sandboxes that mount it.
func (s *Service) users(ctx context.Context) (map[string][]string, error) {
	recs, err := s.store.ListSandboxes(ctx)
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
