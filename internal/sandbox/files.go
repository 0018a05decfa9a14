package sandbox

import (
	"context"
	"io"
	"path"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentclient"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/template"
)

// File calls reach the sandbox's agent, which resolves paths inside the
// sandbox: a symlink or ".." can lead nowhere but into the sandbox's own tree.

// workspacePath makes p absolute, relative paths meaning the workspace.
func workspacePath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(template.Workspace, p)
}

// target checks a path a file call names and finds the sandbox's agent; it
// returns the path made absolute.
// The caller calls release when done with the agent.
func (m *Manager) target(ctx context.Context, id, p string) (inst *instance, release func(), abs string, err error) {
	if p == "" {
		return nil, nil, "", errdefs.InvalidArgument("path is required")
	}
	inst, release, err = m.acquire(ctx, id)
	if err != nil {
		return nil, nil, "", err
	}
	return inst, release, workspacePath(p), nil
}

// ReadFile streams a file's content. The caller closes it.
func (m *Manager) ReadFile(ctx context.Context, id, p, user string) (io.ReadCloser, error) {
	inst, release, abs, err := m.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	rc, err := inst.agent.ReadFile(ctx, abs, userOr(user))
	return releasing(rc, err, release)
}

// WriteFile creates or replaces a file with r's content, making parent
// directories.
func (m *Manager) WriteFile(ctx context.Context, id, p, user string, r io.Reader) (*filesystem.EntryInfo, error) {
	inst, release, abs, err := m.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	defer release()
	u := userOr(user)
	if _, err := inst.agent.WriteFile(ctx, abs, u, r); err != nil {
		return nil, err
	}
	return m.stat(ctx, inst, abs, u)
}

// UploadDir is where uploads land, each file by its own name.
const UploadDir = template.Workspace + "/user-uploads"

// Upload writes a file sent by name, without directories, into UploadDir.
func (m *Manager) Upload(ctx context.Context, id, name, user string, r io.Reader) (*filesystem.EntryInfo, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, errdefs.InvalidArgument("an upload's file name must name a file, without directories; got %q", name)
	}
	return m.WriteFile(ctx, id, UploadDir+"/"+name, user, r)
}

// Stat describes a path.
func (m *Manager) Stat(ctx context.Context, id, p, user string) (*filesystem.EntryInfo, error) {
	inst, release, abs, err := m.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	defer release()
	return m.stat(ctx, inst, abs, userOr(user))
}

func (m *Manager) stat(ctx context.Context, inst *instance, abs, user string) (*filesystem.EntryInfo, error) {
	req := connect.NewRequest(&filesystem.StatRequest{Path: abs})
	agentclient.WithUser(req, user)
	res, err := inst.agent.Filesystem.Stat(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg.GetEntry(), nil
}

// Remove deletes a file, or a directory with its contents.
func (m *Manager) Remove(ctx context.Context, id, p, user string) error {
	inst, release, abs, err := m.target(ctx, id, p)
	if err != nil {
		return err
	}
	defer release()
	req := connect.NewRequest(&filesystem.RemoveRequest{Path: abs})
	agentclient.WithUser(req, userOr(user))
	_, err = inst.agent.Filesystem.Remove(ctx, req)
	return err
}

// ListDir lists a directory, depth levels deep (at least 1).
func (m *Manager) ListDir(ctx context.Context, id, p, user string, depth int) ([]*filesystem.EntryInfo, error) {
	if depth < 1 || depth > 64 {
		return nil, errdefs.InvalidArgument("depth must be between 1 and 64, got %d", depth)
	}
	inst, release, abs, err := m.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	defer release()
	// #nosec G115 -- depth is checked to be 1..64 above
	req := connect.NewRequest(&filesystem.ListDirRequest{Path: abs, Depth: uint32(depth)})
	agentclient.WithUser(req, userOr(user))
	res, err := inst.agent.Filesystem.ListDir(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg.GetEntries(), nil
}

// MakeDir creates a directory and its parents.
func (m *Manager) MakeDir(ctx context.Context, id, p, user string) (*filesystem.EntryInfo, error) {
	inst, release, abs, err := m.target(ctx, id, p)
	if err != nil {
		return nil, err
	}
	defer release()
	req := connect.NewRequest(&filesystem.MakeDirRequest{Path: abs})
	agentclient.WithUser(req, userOr(user))
	res, err := inst.agent.Filesystem.MakeDir(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg.GetEntry(), nil
}

// Move renames a file or directory.
func (m *Manager) Move(ctx context.Context, id, src, dst, user string) (*filesystem.EntryInfo, error) {
	if src == "" || dst == "" {
		return nil, errdefs.InvalidArgument("source and destination are required")
	}
	inst, release, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer release()
	req := connect.NewRequest(&filesystem.MoveRequest{Source: workspacePath(src), Destination: workspacePath(dst)})
	agentclient.WithUser(req, userOr(user))
	res, err := inst.agent.Filesystem.Move(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Msg.GetEntry(), nil
}

// releasing returns rc (or err) such that closing rc calls release: a
// stream read from the agent holds its sandbox until it is closed.
func releasing(rc io.ReadCloser, err error, release func()) (io.ReadCloser, error) {
	if err != nil {
		release()
		return nil, err
	}
	return &releaseOnClose{ReadCloser: rc, release: release}, nil
}

type releaseOnClose struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releaseOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
