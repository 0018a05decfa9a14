package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hutchdev/hutch/internal/agent/agentpb/filesystem"
)

// fsTree makes, in dir: file (0640, "hello"), sub/, sub/inner, sub/deep/x,
// link → sub (symlink), dangling → nowhere.
func fsTree(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{"sub/deep"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "file"), "hello")
	if err := os.Chmod(filepath.Join(dir, "file"), 0o640); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "inner"), "")
	writeFile(t, filepath.Join(dir, "sub", "deep", "x"), "")
	if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "file"), testUID, testUID); err != nil {
		t.Fatal(err)
	}
}

func TestStat(t *testing.T) {
	a := startAgent(t)
	fsTree(t, a.home)
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(a.home, "file"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	link := "sub"

	tests := []struct {
		name string
		path string
		want *filesystem.EntryInfo
	}{
		{name: "file, relative to home", path: "file", want: &filesystem.EntryInfo{
			Name: "file", Type: filesystem.FileType_FILE_TYPE_FILE, Path: filepath.Join(a.home, "file"),
			Size: 5, Mode: 0o640, Permissions: "-rw-r-----", Owner: "user", Group: "user",
		}},
		{name: "tilde", path: "~/file", want: &filesystem.EntryInfo{
			Name: "file", Type: filesystem.FileType_FILE_TYPE_FILE, Path: filepath.Join(a.home, "file"),
			Size: 5, Mode: 0o640, Permissions: "-rw-r-----", Owner: "user", Group: "user",
		}},
		{name: "directory, uncleaned absolute path", path: a.home + "/./sub/deep/..", want: &filesystem.EntryInfo{
			Name: "sub", Type: filesystem.FileType_FILE_TYPE_DIRECTORY, Path: filepath.Join(a.home, "sub"),
			Mode: 0o755, Permissions: "drwxr-xr-x", Owner: "root", Group: "root",
		}},
		{name: "symlink is not followed", path: "link", want: &filesystem.EntryInfo{
			Name: "link", Type: filesystem.FileType_FILE_TYPE_SYMLINK, Path: filepath.Join(a.home, "link"),
			Mode: 0o777, Permissions: "Lrwxrwxrwx", Owner: "root", Group: "root", SymlinkTarget: &link,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := a.fs.Stat(t.Context(), connect.NewRequest(&filesystem.StatRequest{Path: tt.path}))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Msg.GetEntry()
			if got.GetModifiedTime() == nil {
				t.Error("no modified time")
			}
			if got.Type == filesystem.FileType_FILE_TYPE_DIRECTORY || got.Type == filesystem.FileType_FILE_TYPE_SYMLINK {
				tt.want.Size = got.Size // file system dependent
			}
			if err := sameEntry(got, tt.want); err != nil {
				t.Error(err)
			}
		})
	}
	resp, err := a.fs.Stat(t.Context(), connect.NewRequest(&filesystem.StatRequest{Path: "file"}))
	if err == nil && !resp.Msg.GetEntry().GetModifiedTime().AsTime().Equal(mtime) {
		t.Errorf("modified time %v, want %v", resp.Msg.GetEntry().GetModifiedTime().AsTime(), mtime)
	}
}

// sameEntry compares what tests control of an EntryInfo.
func sameEntry(got, want *filesystem.EntryInfo) error {
	g := fmt.Sprintf("%s %s %s size=%d mode=%o %s %s:%s target=%q", got.GetName(), got.GetType(), got.GetPath(), got.GetSize(), got.GetMode(), got.GetPermissions(), got.GetOwner(), got.GetGroup(), got.GetSymlinkTarget())
	w := fmt.Sprintf("%s %s %s size=%d mode=%o %s %s:%s target=%q", want.GetName(), want.GetType(), want.GetPath(), want.GetSize(), want.GetMode(), want.GetPermissions(), want.GetOwner(), want.GetGroup(), want.GetSymlinkTarget())
	if g != w {
		return fmt.Errorf("entry\n got %s\nwant %s", g, w)
	}
	return nil
}

func TestListDir(t *testing.T) {
	a := startAgent(t)
	fsTree(t, a.home)
	tests := []struct {
		name  string
		path  string
		depth uint32
		want  []string // paths relative to home, then type
	}{
		{name: "depth 0 lists entries", path: "", depth: 0, want: []string{"dangling SYMLINK", "file FILE", "link SYMLINK", "sub DIRECTORY"}},
		{name: "depth 1 lists entries", path: a.home, depth: 1, want: []string{"dangling SYMLINK", "file FILE", "link SYMLINK", "sub DIRECTORY"}},
		{name: "depth 2", path: "~", depth: 2, want: []string{"dangling SYMLINK", "file FILE", "link SYMLINK", "sub DIRECTORY", "sub/deep DIRECTORY", "sub/inner FILE"}},
		{name: "depth 5 does not follow symlinks", path: "", depth: 5, want: []string{"dangling SYMLINK", "file FILE", "link SYMLINK", "sub DIRECTORY", "sub/deep DIRECTORY", "sub/deep/x FILE", "sub/inner FILE"}},
		{name: "a symlink to a directory is listed through", path: "link", depth: 1, want: []string{"link/deep DIRECTORY", "link/inner FILE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := a.fs.ListDir(t.Context(), connect.NewRequest(&filesystem.ListDirRequest{Path: tt.path, Depth: tt.depth}))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range resp.Msg.GetEntries() {
				rel, _ := filepath.Rel(a.home, e.GetPath())
				got = append(got, rel+" "+strings.TrimPrefix(e.GetType().String(), "FILE_TYPE_"))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestMakeDir(t *testing.T) {
	a := startAgent(t)
	writeFile(t, filepath.Join(a.home, "file"), "")
	resp, err := a.fs.MakeDir(t.Context(), connect.NewRequest(&filesystem.MakeDirRequest{Path: "a/b/c"}))
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Msg.GetEntry(); e.GetPath() != filepath.Join(a.home, "a/b/c") || e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY || e.GetOwner() != "user" {
		t.Errorf("entry %v", e)
	}
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		fi, err := os.Stat(filepath.Join(a.home, d))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != testUID || st.Gid != testUID {
			t.Errorf("%s belongs to %d:%d", d, st.Uid, st.Gid)
		}
	}
	// As root, new directories belong to root.
	if _, err := a.fs.MakeDir(t.Context(), asUser(connect.NewRequest(&filesystem.MakeDirRequest{Path: filepath.Join(a.home, "rootdir")}), "root")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(a.home, "rootdir")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("rootdir: %v", err)
	}

	errs := []struct {
		path string
		code connect.Code
		msg  string
	}{
		{path: "a/b", code: connect.CodeAlreadyExists, msg: "directory " + filepath.Join(a.home, "a/b") + " already exists"},
		{path: "file", code: connect.CodeAlreadyExists, msg: "is not a directory"},
		{path: "file/x", code: connect.CodeInvalidArgument, msg: filepath.Join(a.home, "file") + " is not a directory"},
		{path: "~bob/x", code: connect.CodeInvalidArgument, msg: "only ~ and ~/ are expanded"},
	}
	for _, tt := range errs {
		_, err := a.fs.MakeDir(t.Context(), connect.NewRequest(&filesystem.MakeDirRequest{Path: tt.path}))
		if connect.CodeOf(err) != tt.code || !strings.Contains(message(err), tt.msg) {
			t.Errorf("MakeDir(%s) = %v, want %v with %q", tt.path, err, tt.code, tt.msg)
		}
	}
}

func TestMoveAndRemove(t *testing.T) {
	a := startAgent(t)
	fsTree(t, a.home)
	resp, err := a.fs.Move(t.Context(), connect.NewRequest(&filesystem.MoveRequest{Source: "file", Destination: "sub/moved"}))
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Msg.GetEntry(); e.GetPath() != filepath.Join(a.home, "sub/moved") || e.GetSize() != 5 {
		t.Errorf("moved entry %v", e)
	}
	if _, err := os.Stat(filepath.Join(a.home, "file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("source still there: %v", err)
	}
	if _, err := a.fs.Remove(t.Context(), connect.NewRequest(&filesystem.RemoveRequest{Path: "sub"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(a.home, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sub still there: %v", err)
	}
	// Removing a symlink removes the link, not its target.
	if _, err := a.fs.Remove(t.Context(), connect.NewRequest(&filesystem.RemoveRequest{Path: "dangling"})); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(a.home, "missing")
	tests := []struct {
		name string
		call func() error
		code connect.Code
		msg  string
	}{
		{name: "move missing source", call: func() error {
			_, err := a.fs.Move(t.Context(), connect.NewRequest(&filesystem.MoveRequest{Source: "missing", Destination: "x"}))
			return err
		}, code: connect.CodeNotFound, msg: missing + ": no such file or directory"},
		{name: "move into missing directory", call: func() error {
			writeFile(t, filepath.Join(a.home, "f2"), "")
			_, err := a.fs.Move(t.Context(), connect.NewRequest(&filesystem.MoveRequest{Source: "f2", Destination: "nodir/f2"}))
			return err
		}, code: connect.CodeNotFound, msg: "move " + filepath.Join(a.home, "f2") + " to " + filepath.Join(a.home, "nodir/f2")},
		{name: "remove missing", call: func() error {
			_, err := a.fs.Remove(t.Context(), connect.NewRequest(&filesystem.RemoveRequest{Path: "missing"}))
			return err
		}, code: connect.CodeNotFound, msg: missing},
		{name: "stat missing", call: func() error {
			_, err := a.fs.Stat(t.Context(), connect.NewRequest(&filesystem.StatRequest{Path: "missing"}))
			return err
		}, code: connect.CodeNotFound, msg: missing},
		{name: "list a file", call: func() error {
			_, err := a.fs.ListDir(t.Context(), connect.NewRequest(&filesystem.ListDirRequest{Path: "f2"}))
			return err
		}, code: connect.CodeInvalidArgument, msg: "is not a directory"},
		{name: "list missing", call: func() error {
			_, err := a.fs.ListDir(t.Context(), connect.NewRequest(&filesystem.ListDirRequest{Path: "missing"}))
			return err
		}, code: connect.CodeNotFound, msg: missing},
		{name: "unknown user", call: func() error {
			_, err := a.fs.Stat(t.Context(), asUser(connect.NewRequest(&filesystem.StatRequest{Path: "/"}), "mallory"))
			return err
		}, code: connect.CodeInvalidArgument, msg: `unknown user "mallory"`},
		{name: "watch missing", call: func() error {
			_, err := a.fs.CreateWatcher(t.Context(), connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "missing"}))
			return err
		}, code: connect.CodeNotFound, msg: missing + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if connect.CodeOf(err) != tt.code || !strings.Contains(message(err), tt.msg) {
				t.Errorf("err = %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
}

func TestFSErrorCodes(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		code  connect.Code
	}{
		{syscall.ENOENT, connect.CodeNotFound},
		{syscall.EEXIST, connect.CodeAlreadyExists},
		{syscall.ENOTEMPTY, connect.CodeAlreadyExists},
		{syscall.ENOTDIR, connect.CodeInvalidArgument},
		{syscall.EISDIR, connect.CodeInvalidArgument},
		{syscall.EINVAL, connect.CodeInvalidArgument},
		{syscall.EACCES, connect.CodePermissionDenied},
		{syscall.EPERM, connect.CodePermissionDenied},
		{syscall.ENOSPC, connect.CodeResourceExhausted},
		{syscall.EXDEV, connect.CodeFailedPrecondition},
		{syscall.EIO, connect.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.errno.Error(), func(t *testing.T) {
			err := fsError(&os.PathError{Op: "open", Path: "/x/y", Err: tt.errno})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != tt.code || ce.Message() != "/x/y: "+tt.errno.Error() {
				t.Errorf("fsError = %v, want code %v naming the path", err, tt.code)
			}
		})
	}
}
