package files

import (
	"context"
	"errors"
	"path"

	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Watch operations, as WatchEvent.Op says them.
const (
	OpCreate = "create"
	OpWrite  = "write"
	OpRemove = "remove"
	OpRename = "rename" // the old name; the new one is a create
	OpChmod  = "chmod"
	// OpOverflow: events came faster than they were read, and some were
	// lost; the watch goes on (an OpWatching follows).
	OpOverflow = "overflow"
	// OpWatching: the watch is made; what changes from now on is told.
	OpWatching = "watching"
)

// WatchEvent is a change under a watched directory.
type WatchEvent struct {
	// Path is the changed file's absolute path (the watched directory's
	// for OpWatching and OpOverflow).
	Path string
	Op   string
}

// Watch sends the changes under directory p (and its subdirectories, with
// recursive) to fn until ctx ends or fn fails: first OpWatching, once the
// watch is made, then each change made after it.
// The agent watches with inotify (inside gVisor too), bounded: events that
// come faster than they are read are lost, told as an OpOverflow event,
// and the watch goes on. While it lasts the call holds the sandbox awake,
// as any call does. A path that is not there is NotFound, one that is not
// a directory InvalidArgument.
func (s *Service) Watch(ctx context.Context, id, p, user string, recursive bool, fn func(WatchEvent) error) error {
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return err
	}
	defer release()
	u := rootfs.UserOr(user)
	for {
		err := r.Agent().Watch(ctx, abs, u, recursive, func(ev agentclient.FileEvent) error {
			return fn(WatchEvent{Path: path.Join(abs, ev.Name), Op: ev.Op})
		})
		if !errors.Is(err, agentclient.ErrOverflow) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil // the caller left
			}
			return r.Err(ctx, err)
		}
		if err := fn(WatchEvent{Path: abs, Op: OpOverflow}); err != nil {
			return err
		}
	}
}
