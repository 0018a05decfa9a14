package imagestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/hutchdev/hutch/internal/base/ctxio"
	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Dir is a Store in a directory: a blob is a file, its name the file's path
// under the directory. Meant for a directory that every node mounts alike
// (NFS), it relies only on what such a mount gives: a rename within a
// directory replaces its target at once, and fsync makes a file and a
// directory entry durable.
//
// Every access goes through an os.Root, so that nothing outside the
// directory is touched even through a symbolic link that someone placed in
// it; names are checked (ValidName) before that.
type Dir struct {
	root *os.Root
	path string
	// noSync skips the fsyncs, for the fuzz test: it checks where names
	// lead, not durability, and runs thousands of Puts a second without
	// them (as pgtest runs PostgreSQL with fsync off).
	noSync bool
}

var _ Store = (*Dir)(nil)

// tempPrefix begins the name of a blob being written. ValidName refuses
// names that begin with '.', so no blob is ever mistaken for one, and
// List passes them over.
const tempPrefix = ".tmp-"

// copyBuffer is the size of the writes of a Put: large writes keep an NFS
// client from sending many small ones.
const copyBuffer = 1 << 20

// Blobs and directories are the node's (root's) alone: a writable layer
// holds whatever the sandbox's user wrote, secrets included.
const (
	filePerm = 0o600
	dirPerm  = 0o700
)

// OpenDir opens the store in directory dir, which must exist: a shared
// mount that is missing must not turn into a directory on this node alone.
// It checks that the directory can be written to.
func OpenDir(dir string) (*Dir, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errdefs.InvalidArgument("image store directory %s does not exist: create it, or mount the shared directory there", dir)
	case err != nil:
		return nil, errdefs.InvalidArgument("image store directory %s: %v", dir, err)
	case !info.IsDir():
		return nil, errdefs.InvalidArgument("image store %s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errdefs.InvalidArgument("image store directory %s: %v", dir, err)
	}
	d := &Dir{root: root, path: dir}
	if err := d.probe(); err != nil {
		_ = root.Close()
		return nil, errdefs.InvalidArgument("image store directory %s cannot be written to: %v", dir, err)
	}
	return d, nil
}

// probe creates a temporary file and removes it.
func (d *Dir) probe() error {
	name := tempPrefix + "probe-" + randomSuffix()
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return err
	}
	_ = f.Close()
	return d.root.Remove(name)
}

// String names the store for logs.
func (d *Dir) String() string { return "dir:" + d.path }

// Close closes the directory.
func (d *Dir) Close() error { return d.root.Close() }

// Put writes r to a temporary file beside name's, syncs it, renames it to
// name and syncs the directories: the blob appears whole or not at all, and
// stays once Put has returned, however the node ends.
func (d *Dir) Put(ctx context.Context, name string, r io.Reader) (err error) {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	dir := path.Dir(name)
	f, tmp, err := d.createTemp(dir)
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	closed, renamed := false, false
	defer func() {
		if err != nil && !closed {
			_ = f.Close()
		}
		if err != nil && !renamed {
			_ = d.root.Remove(tmp)
		}
	}()
	// Hidden behind a plain io.Writer, f cannot take over the copy with
	// its ReadFrom, which would write in 32 KiB pieces.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, ctxio.Reader(ctx, r), make([]byte, copyBuffer)); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	if !d.noSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("put %s: sync: %w", name, err)
		}
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	// The last moment to give up: after the rename the blob is there.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	if err := d.root.Rename(tmp, name); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	renamed = true
	// The blob is in place: what fails from here on is its durability
	// across a crash, not the Put, so the error is reported but the blob
	// stays (a reader may already have it).
	if err := d.syncDirs(dir); err != nil {
		return fmt.Errorf("put %s: sync its directory: %w", name, err)
	}
	return nil
}

// createTemp creates a new temporary file in dir, making dir first. A
// Delete of the directory's last blob removes the directory, so it may be
// gone between the two: then it is made again.
func (d *Dir) createTemp(dir string) (*os.File, string, error) {
	for attempt := 0; ; attempt++ {
		if dir != "." {
			if err := d.root.MkdirAll(dir, dirPerm); err != nil {
				return nil, "", err
			}
		}
		tmp := path.Join(dir, tempPrefix+randomSuffix())
		f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
		if err == nil {
			return f, tmp, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 2 {
			return nil, "", err
		}
	}
}

// syncDirs syncs dir and each directory above it up to the root: MkdirAll
// may have made some of them, and a new directory's entry lasts only once
// its parent is synced.
func (d *Dir) syncDirs(dir string) error {
	for {
		f, err := d.root.Open(dir)
		if err != nil {
			return err
		}
		if !d.noSync {
			err = f.Sync()
		}
		_ = f.Close()
		if err != nil {
			return err
		}
		if dir == "." {
			return nil
		}
		dir = path.Dir(dir)
	}
}

// Get opens the blob. The open file keeps reading what it opened after a
// rename replaces or a Delete removes it (NFS too, which keeps an open
// file's data until it is closed).
func (d *Dir) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", name, err)
	}
	f, err := d.root.Open(name)
	if err != nil {
		return nil, d.notFound("get", name, err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("get %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, notFound(name)
	}
	return &dirReader{Reader: ctxio.Reader(ctx, f), f: f}, nil
}

// dirReader is a blob's file, whose reads fail once the context of the Get
// has ended, as an S3 response's do.
type dirReader struct {
	io.Reader
	f *os.File
}

func (r *dirReader) Close() error { return r.f.Close() }

// Stat returns the blob's size and modification time.
func (d *Dir) Stat(ctx context.Context, name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", name, err)
	}
	info, err := d.root.Stat(name)
	if err != nil {
		return Info{}, d.notFound("stat", name, err)
	}
	if !info.Mode().IsRegular() {
		return Info{}, notFound(name)
	}
	return Info{Name: name, Size: info.Size(), ModTime: info.ModTime()}, nil
}

// List walks the deepest directory that prefix names whole.
func (d *Dir) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validPrefix(prefix); err != nil {
		return nil, err
	}
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	var infos []Info
	err := fs.WalkDir(d.root.FS(), start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			// Gone since its directory was read (a Delete's pruning), or
			// the start is not there at all: nothing to list there.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != "." {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil // a blob being written, or not one of ours
		}
		if e.IsDir() {
			// Go down only where the names can match the prefix.
			if p != "." && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(p, prefix) || ValidName(p) != nil {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since
		}
		if err != nil {
			return err
		}
		infos = append(infos, Info{Name: p, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	// The walk goes directory by directory ("a/b" before "a-b"); S3 lists
	// in byte order of the whole name, and so does List.
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// Delete removes the blob, then the directories above it that it leaves
// empty, so that a store does not fill with the empty directories of
// sandboxes long gone.
func (d *Dir) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	info, err := d.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	if info.IsDir() {
		return nil // a directory of other names: no blob of this one
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	// Remove takes a directory only when it is empty; a Put that makes a
	// file in it meanwhile makes it again (createTemp).
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if d.root.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// notFound makes err, from opening name, ErrNotFound when it says that
// nothing is there.
func (d *Dir) notFound(op, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
		return notFound(name)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// isNotDir says that err is what a path through a file gives ("a/b/c" when
// "a/b" is a blob): that name holds no blob either.
func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

func notFound(name string) error {
	return errdefs.NotFound("no image %s in the image store", name)
}

// randomSuffix makes temporary names that no other node picks too.
func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
