package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem/filesystemconnect"
)

// filesystemService implements filesystem.Filesystem. It works as root
// inside the sandbox; what it creates belongs to the request's user.
// Watching (WatchDir and the polled watchers) is in watch.go.
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	srv   *server
	watch watches
}

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// requestPath resolves a request's path against its user's home.
func (f *filesystemService) requestPath(h http.Header, p string) (string, account, error) {
	acct, err := f.srv.requestUser(h, "")
	if err != nil {
		return "", account{}, err
	}
	abs, err := resolvePath(p, acct)
	return abs, acct, err
}

func (f *filesystemService) Stat(_ context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	p, _, err := f.requestPath(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: entryInfo(p, fi, f.srv.loadIDNames())}), nil
}

func (f *filesystemService) ListDir(_ context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	p, _, err := f.requestPath(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := max(int(req.Msg.GetDepth()), 1)
	// The directory asked for may be a symlink to one; below it, symlinks
	// are listed but never followed.
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", p))
	}
	names := f.srv.loadIDNames()
	var entries []*filesystem.EntryInfo
	if err := listDir(p, depth, names, &entries); err != nil {
		return nil, fsError(err)
	}
	slices.SortFunc(entries, func(a, b *filesystem.EntryInfo) int { return strings.Compare(a.Path, b.Path) })
	return connect.NewResponse(&filesystem.ListDirResponse{Entries: entries}), nil
}

func listDir(dir string, depth int, names idNames, out *[]*filesystem.EntryInfo) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		} else if err != nil {
			return err
		}
		*out = append(*out, entryInfo(p, fi, names))
		if depth > 1 && de.IsDir() { // a symlink is not IsDir here
			if err := listDir(p, depth-1, names, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *filesystemService) MakeDir(_ context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p, acct, err := f.requestPath(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
		}
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists and is not a directory", p))
	}
	if err := makeDirs(p, acct); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: entryInfo(p, fi, f.srv.loadIDNames())}), nil
}

// makeDirs creates dir and its missing parents (mode 0755 less the umask),
// owned by acct.
func makeDirs(dir string, acct account) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", dir))
		}
		return nil
	}
	// ENOTDIR: some parent is not a directory; the recursion names it.
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fsError(err)
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := makeDirs(parent, acct); err != nil {
			return err
		}
	}
	// #nosec G301 -- directories made for the user, with the usual mode
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
				return nil // made meanwhile
			}
		}
		return fsError(err)
	}
	if err := os.Lchown(dir, int(acct.UID), int(acct.GID)); err != nil {
		return fsError(err)
	}
	return nil
}

// Move renames source to destination, like rename(2): it replaces an
// existing file and does not create the destination's parent directories.
func (f *filesystemService) Move(_ context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	src, acct, err := f.requestPath(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := resolvePath(req.Msg.GetDestination(), acct)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, fsError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, fsError(err)
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entryInfo(dst, fi, f.srv.loadIDNames())}), nil
}

func (f *filesystemService) Remove(_ context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p, _, err := f.requestPath(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove /"))
	}
	if _, err := os.Lstat(p); err != nil {
		return nil, fsError(err)
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// entryInfo describes the file at p (not following a symlink there).
//
// mode holds the permission bits with setuid, setgid and sticky in their
// POSIX places (st_mode & 07777, what chmod takes). envd sends the
// permission bits too; Go's FileMode type bits sit in high bits no other
// language knows, and the type is in the type field anyway. permissions is
// the full Go rendering ("drwxr-xr-x", "Lrwxrwxrwx"). symlink_target is the
// link's text as readlink(2) returns it, which may be relative or dangle.
func entryInfo(p string, fi fs.FileInfo, names idNames) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{
		Name:         filepath.Base(p),
		Path:         p,
		Size:         fi.Size(),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		e.Type = filesystem.FileType_FILE_TYPE_FILE
	case m.IsDir():
		e.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	case m&fs.ModeSymlink != 0:
		e.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		if target, err := os.Readlink(p); err == nil {
			e.SymlinkTarget = &target
		}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Mode = st.Mode & 0o7777
		e.Owner = names.user(st.Uid)
		e.Group = names.group(st.Gid)
	} else {
		e.Mode = uint32(fi.Mode().Perm())
	}
	return e
}

// fsError turns an error of the os package into a Connect error whose
// message names the path.
func fsError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	msg := err.Error()
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		msg = pe.Path + ": " + pe.Err.Error()
	case errors.As(err, &le):
		msg = "move " + le.Old + " to " + le.New + ": " + le.Err.Error()
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return connect.NewError(connect.CodeInternal, errors.New(msg))
	}
	code := connect.CodeInternal
	switch errno {
	case syscall.ENOENT:
		code = connect.CodeNotFound
	case syscall.EEXIST, syscall.ENOTEMPTY:
		code = connect.CodeAlreadyExists
	case syscall.ENOTDIR, syscall.EISDIR, syscall.EINVAL, syscall.ENAMETOOLONG:
		code = connect.CodeInvalidArgument
	case syscall.EACCES, syscall.EPERM:
		code = connect.CodePermissionDenied
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		code = connect.CodeResourceExhausted
	case syscall.EXDEV, syscall.ELOOP, syscall.EROFS, syscall.EBUSY, syscall.ETXTBSY:
		code = connect.CodeFailedPrecondition
	}
	return connect.NewError(code, errors.New(msg))
}
