// Package files reads and changes sandboxes' files: a service beside the
// lifecycle core, reaching each sandbox through the core's Acquire and the
// sandbox's agent. The agent resolves paths inside the sandbox: a symlink
// or ".." can lead nowhere but into the sandbox's own tree.
package files

import (
	"context"
	"io"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Entry describes a file in a sandbox (a symlink itself, not what it
// points to). It is the agent client's type: the one definition of what
// the agent tells of a file.
type Entry = agentclient.Entry

// Type is what kind of file an Entry is.
type Type = agentclient.FileType

const (
	TypeRegular = agentclient.FileRegular
	TypeDir     = agentclient.FileDir
	TypeSymlink = agentclient.FileSymlink
	TypeOther   = agentclient.FileOther // a device, socket or pipe
)

// UploadDir is where uploads land, each file by its own name.
const UploadDir = rootfs.Workspace + "/user-uploads"

// Service is the file calls on the core's sandboxes. Each call holds its
// sandbox running (waking it if need be) until it returns, or, for a read,
// until the stream is closed. Paths are absolute or in the workspace (see
// rootfs.WorkspacePath); user is who the agent acts as, the sandbox user
// when empty. It is safe for concurrent use.
type Service struct {
	core *core.Manager
}

// New returns a Service over the sandboxes of core.
func New(core *core.Manager) *Service {
	return &Service{core: core}
}

// target checks a path a file call names and acquires its sandbox; it
// returns the path made absolute.
// The caller calls release when done with the sandbox.
func (s *Service) target(ctx context.Context, id, p string) (r *core.Running, release func(), abs string, err error) {
	if p == "" {
		return nil, nil, "", errdefs.InvalidArgument("path is required")
	}
	r, release, err = s.core.Acquire(ctx, id)
	if err != nil {
		return nil, nil, "", err
	}
	return r, release, rootfs.WorkspacePath(p), nil
}

// ReadFile streams a file's content. The caller closes it.
func (s *Service) ReadFile(ctx context.Context, id, p, user string) (io.ReadCloser, error) {
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	rc, err := r.Agent().ReadFile(ctx, abs, rootfs.UserOr(user))
	return core.Holding(rc, r.Err(ctx, err), release)
}

// WriteFile creates or replaces a file with what content holds, making
// parent directories.
func (s *Service) WriteFile(ctx context.Context, id, p, user string, content io.Reader) (Entry, error) {
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return Entry{}, err
	}
	defer release()
	u := rootfs.UserOr(user)
	if _, err := r.Agent().WriteFile(ctx, abs, u, content); err != nil {
		return Entry{}, r.Err(ctx, err)
	}
	e, err := r.Agent().Stat(ctx, abs, u)
	return e, r.Err(ctx, err)
}

// Upload writes a file sent by name, without directories, into UploadDir.
func (s *Service) Upload(ctx context.Context, id, name, user string, content io.Reader) (Entry, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return Entry{}, errdefs.InvalidArgument("an upload's file name must name a file, without directories; got %q", name)
	}
	return s.WriteFile(ctx, id, UploadDir+"/"+name, user, content)
}

// Stat describes a path.
func (s *Service) Stat(ctx context.Context, id, p, user string) (Entry, error) {
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return Entry{}, err
	}
	defer release()
	e, err := r.Agent().Stat(ctx, abs, rootfs.UserOr(user))
	return e, r.Err(ctx, err)
}

// Remove deletes a file, or a directory with its contents.
func (s *Service) Remove(ctx context.Context, id, p, user string) error {
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return err
	}
	defer release()
	return r.Err(ctx, r.Agent().Remove(ctx, abs, rootfs.UserOr(user)))
}

// ListDir lists a directory, depth levels deep (1 to 64).
func (s *Service) ListDir(ctx context.Context, id, p, user string, depth int) ([]Entry, error) {
	if depth < 1 || depth > 64 {
		return nil, errdefs.InvalidArgument("depth must be between 1 and 64, got %d", depth)
	}
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	defer release()
	entries, err := r.Agent().ListDir(ctx, abs, rootfs.UserOr(user), depth)
	return entries, r.Err(ctx, err)
}

// MakeDir creates a directory and its parents.
func (s *Service) MakeDir(ctx context.Context, id, p, user string) (Entry, error) {
	r, release, abs, err := s.target(ctx, id, p)
	if err != nil {
		return Entry{}, err
	}
	defer release()
	e, err := r.Agent().MakeDir(ctx, abs, rootfs.UserOr(user))
	return e, r.Err(ctx, err)
}

// Move renames a file or directory.
func (s *Service) Move(ctx context.Context, id, src, dst, user string) (Entry, error) {
	if src == "" || dst == "" {
		return Entry{}, errdefs.InvalidArgument("source and destination are required")
	}
	r, release, err := s.core.Acquire(ctx, id)
	if err != nil {
		return Entry{}, err
	}
	defer release()
	e, err := r.Agent().Move(ctx, rootfs.WorkspacePath(src), rootfs.WorkspacePath(dst), rootfs.UserOr(user))
	return e, r.Err(ctx, err)
}
