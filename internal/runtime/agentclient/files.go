package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/agent/agentpb/hutchagent"
	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// FileType is what kind of file an Entry is.
type FileType int

const (
	// FileOther is what is neither of the others: a device, socket or pipe.
	FileOther FileType = iota
	FileRegular
	FileDir
	FileSymlink
)

// Entry describes a file in the sandbox, not following a symlink there.
type Entry struct {
	Name string // base name
	Path string // absolute, inside the sandbox
	Type FileType
	Size int64
	// Mode is the permission bits with setuid, setgid and sticky in their
	// POSIX places (st_mode & 07777, what chmod takes).
	Mode uint32
	// Permissions is Go's rendering of the mode: "drwxr-xr-x".
	Permissions string
	Owner       string
	Group       string
	ModifiedAt  time.Time
	// SymlinkTarget is a symlink's text as readlink(2) returns it, which
	// may be relative or dangle.
	SymlinkTarget string
}

func entry(e *filesystem.EntryInfo) Entry {
	out := Entry{
		Name: e.GetName(), Path: e.GetPath(), Size: e.GetSize(), Mode: e.GetMode(),
		Permissions: e.GetPermissions(), Owner: e.GetOwner(), Group: e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
	if t := e.GetModifiedTime(); t != nil {
		out.ModifiedAt = t.AsTime()
	}
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_FILE:
		out.Type = FileRegular
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		out.Type = FileDir
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		out.Type = FileSymlink
	}
	return out
}

// Stat describes the file at path. A path that is not there is NotFound.
func (c *Client) Stat(ctx context.Context, path, user string) (Entry, error) {
	res, err := c.filesystem.Stat(ctx, withUser(connect.NewRequest(&filesystem.StatRequest{Path: path}), user))
	if err != nil {
		return Entry{}, err
	}
	return entry(res.Msg.GetEntry()), nil
}

// ListDir lists directory path (a symlink to one counts), depth levels
// deep (1: its entries), sorted by path. Symlinks below it are listed,
// never followed. A path that is not a directory is InvalidArgument.
func (c *Client) ListDir(ctx context.Context, path, user string, depth int) ([]Entry, error) {
	if depth < 1 || depth > 1<<16 {
		return nil, errdefs.InvalidArgument("depth must be between 1 and %d, got %d", 1<<16, depth)
	}
	// #nosec G115 -- depth is checked above
	req := connect.NewRequest(&filesystem.ListDirRequest{Path: path, Depth: uint32(depth)})
	res, err := c.filesystem.ListDir(ctx, withUser(req, user))
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(res.Msg.GetEntries()))
	for _, e := range res.Msg.GetEntries() {
		out = append(out, entry(e))
	}
	return out, nil
}

// MakeDir creates directory path and its missing parents, owned by user.
// A path that exists is AlreadyExists.
func (c *Client) MakeDir(ctx context.Context, path, user string) (Entry, error) {
	res, err := c.filesystem.MakeDir(ctx, withUser(connect.NewRequest(&filesystem.MakeDirRequest{Path: path}), user))
	if err != nil {
		return Entry{}, err
	}
	return entry(res.Msg.GetEntry()), nil
}

// Move renames src to dst as rename(2) does: it replaces a file at dst and
// does not create dst's parent directories.
func (c *Client) Move(ctx context.Context, src, dst, user string) (Entry, error) {
	req := connect.NewRequest(&filesystem.MoveRequest{Source: src, Destination: dst})
	res, err := c.filesystem.Move(ctx, withUser(req, user))
	if err != nil {
		return Entry{}, err
	}
	return entry(res.Msg.GetEntry()), nil
}

// Remove deletes the file at path, or the directory with everything in it.
func (c *Client) Remove(ctx context.Context, path, user string) error {
	_, err := c.filesystem.Remove(ctx, withUser(connect.NewRequest(&filesystem.RemoveRequest{Path: path}), user))
	return err
}

// ReadFile returns the content of the regular file at path, streamed as it
// is read; the caller closes it. A directory is InvalidArgument.
func (c *Client) ReadFile(ctx context.Context, path, user string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, filesURL(path, user), nil)
	if err != nil {
		return nil, fmt.Errorf("read %s from the agent: %w", path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, httpError(resp)
	}
	return resp.Body, nil
}

// WrittenFile is what WriteFile wrote.
type WrittenFile struct {
	Name string // base name
	Path string // absolute path inside the sandbox
}

// WriteFile replaces the file at path with the content of r, atomically,
// creating parent directories; the file and new directories belong to user.
// A symlink at path is followed: the file it points to is replaced.
func (c *Client) WriteFile(ctx context.Context, path, user string, r io.Reader) (*WrittenFile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, filesURL(path, user), r)
	if err != nil {
		return nil, fmt.Errorf("write %s to the agent: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpError(resp)
	}
	var written []WrittenFile
	if err := decodeJSON(resp.Body, &written); err != nil {
		return nil, fmt.Errorf("write %s: unexpected answer from the agent: %w", path, err)
	}
	if len(written) != 1 {
		return nil, fmt.Errorf("write %s: unexpected answer from the agent (%d files)", path, len(written))
	}
	return &written[0], nil
}

// filesURL is envd's /files URL for path as user.
func filesURL(path, user string) string {
	q := url.Values{"path": {path}}
	if user != "" {
		q.Set("username", user)
	}
	return baseURL + "/files?" + q.Encode()
}

// Archive streams directory path packed as format (tools.FormatTarGz, the
// default, tools.FormatZip, or tools.FormatTar for the daemon to re-pack),
// as user sees it; the caller closes it. The
// agent's refusal (not there, not a directory) comes from Archive itself;
// a failure while packing is the error of the Read that reaches it, so a
// cut archive never reads as a whole one.
func (c *Client) Archive(ctx context.Context, path, format, user string) (io.ReadCloser, error) {
	stream, err := c.agent.Archive(ctx, connect.NewRequest(&hutchagent.ArchiveRequest{Path: path, Format: format, User: user}))
	if err != nil {
		return nil, err
	}
	a := &archiveReader{stream: stream}
	// The first chunk, or the refusal.
	if !stream.Receive() {
		_ = stream.Close()
		if err := stream.Err(); err != nil {
			return nil, err
		}
		a.done = true
		return a, nil
	}
	a.chunk = stream.Msg().GetData()
	return a, nil
}

// archiveReader reads an Archive stream's chunks.
type archiveReader struct {
	stream *connect.ServerStreamForClient[hutchagent.ArchiveResponse]
	chunk  []byte
	done   bool
}

func (a *archiveReader) Read(p []byte) (int, error) {
	for len(a.chunk) == 0 {
		if a.done {
			return 0, io.EOF
		}
		if !a.stream.Receive() {
			a.done = true
			if err := a.stream.Err(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		a.chunk = a.stream.Msg().GetData()
	}
	n := copy(p, a.chunk)
	a.chunk = a.chunk[n:]
	return n, nil
}

func (a *archiveReader) Close() error {
	a.done = true
	return a.stream.Close()
}

// RunTool runs file tool name (package tools) in the sandbox with its JSON
// arguments, acting for user (what it makes is theirs), relative paths in
// dir ("" for the user's home). It returns the tool's JSON result, or its
// own failure as a *tools.Error; other errors are the call's.
func (c *Client) RunTool(ctx context.Context, name string, args json.RawMessage, dir, user string) (json.RawMessage, error) {
	res, err := c.agent.RunTool(ctx, connect.NewRequest(&hutchagent.RunToolRequest{Name: name, Args: args, Cwd: dir, User: user}))
	if err != nil {
		return nil, err
	}
	if e := res.Msg.GetError(); e != nil {
		return nil, &tools.Error{Kind: e.GetKind(), Message: e.GetMessage()}
	}
	return res.Msg.GetResult(), nil
}
