package agentclient

import (
	"context"
	"errors"
	"io"
	"strings"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// FileEvent is a change the agent saw under a watched directory.
type FileEvent struct {
	// Name is the changed path, relative to the watched directory.
	Name string
	// Op is "create", "write", "remove", "rename" or "chmod"; "watching"
	// (with no Name) once the watch is made, before any change.
	Op string
}

// ErrOverflow is what ends a watch whose events came faster than they
// were read: some were lost. The caller may watch again.
var ErrOverflow = errors.New("overflow")

// Watch streams the changes under directory path (and its subdirectories
// with recursive) to fn, from the moment it returns no error until ctx
// ends, fn fails, or the watch ends: with ErrOverflow (wrapped, with the
// agent's words) when events were lost, or another error. A path that is
// not there is NotFound, one that is not a directory InvalidArgument.
func (c *Client) Watch(ctx context.Context, path, user string, recursive bool, fn func(FileEvent) error) error {
	req := connect.NewRequest(&filesystem.WatchDirRequest{Path: path, Recursive: recursive})
	stream, err := c.filesystem.WatchDir(ctx, withUser(req, user))
	if err != nil {
		return err
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		if stream.Msg().GetStart() != nil {
			if err := fn(FileEvent{Op: "watching"}); err != nil {
				return err
			}
			continue
		}
		ev := stream.Msg().GetFilesystem()
		if ev == nil {
			continue // a keepalive
		}
		op, ok := fileOps[ev.GetType()]
		if !ok {
			continue
		}
		if err := fn(FileEvent{Name: ev.GetName(), Op: op}); err != nil {
			return err
		}
	}
	err = stream.Err()
	if errdefs.Kind(err) == errdefs.ErrResourceExhausted {
		if msg, ok := errdefs.UserMessage(err); ok && strings.HasPrefix(msg, "overflow") {
			return errors.Join(ErrOverflow, err)
		}
	}
	if err == nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return io.EOF // the agent ended the watch (it is shutting down)
	}
	return err
}

var fileOps = map[filesystem.EventType]string{
	filesystem.EventType_EVENT_TYPE_CREATE: "create",
	filesystem.EventType_EVENT_TYPE_WRITE:  "write",
	filesystem.EventType_EVENT_TYPE_REMOVE: "remove",
	filesystem.EventType_EVENT_TYPE_RENAME: "rename",
	filesystem.EventType_EVENT_TYPE_CHMOD:  "chmod",
}
