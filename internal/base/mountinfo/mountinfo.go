// Package mountinfo reads this process's mount table, for the code that
// must be sure nothing is mounted under a directory before it removes it.
package mountinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Point     string // where it is mounted
	Options   string // the mount's own options (ro, nosuid, idmapped, …)
	FSType    string
	Source    string // the device, or what the filesystem names
	SuperOpts string // the filesystem's own options (overlay's lowerdir, …)
}

// Mounts lists the mounts of the calling thread's mount namespace, in the
// order they were mounted: the process's, unless the thread joined another
// (locked to its goroutine). Not /proc/self's: that is the main thread's,
// which a goroutine locked to it and gone from it may have left in another
// namespace (Go parks the main thread instead of ending it).
func Mounts() ([]Mount, error) {
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []Mount
	for line := range strings.Lines(string(b)) {
		// id parent maj:min root point opts [optional…] - type source superopts
		pre, post, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 6 || len(b) < 3 {
			continue
		}
		out = append(out, Mount{Point: unescape(a[4]), Options: a[5], FSType: b[0], Source: unescape(b[1]), SuperOpts: b[2]})
	}
	return out, nil
}

// Under lists the mount points at dir or below it, in mount order.
func Under(dir string) ([]string, error) {
	all, err := Mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range all {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	return out, nil
}

// InTree is Under for a small tree: it asks dir and each file below it
// whether it is the root of a mount (statx's STATX_ATTR_MOUNT_ROOT, Linux
// 5.8), not going into one, instead of reading the mount table, which
// grows with every mount of the namespace (three or more per sandbox). A
// point hidden under another mount is not seen, but the mount hiding it
// is. Where the kernel does not say, it is Under.
func InTree(dir string) ([]string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var points []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, 0, &st); err != nil {
			return &fs.PathError{Op: "statx", Path: path, Err: err}
		}
		if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return errNoMountRoot
		}
		if st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return nil
		}
		points = append(points, path)
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if errors.Is(err, errNoMountRoot) {
		return Under(dir)
	}
	return points, err
}

// errNoMountRoot is InTree's: the kernel does not say which files are
// mount roots.
var errNoMountRoot = errors.New("statx does not report mount roots")

// Find returns the topmost mount at point.
func Find(point string) (Mount, error) {
	all, err := Mounts()
	if err != nil {
		return Mount{}, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Point == point {
			return all[i], nil
		}
	}
	return Mount{}, fmt.Errorf("%s is not a mount point", point)
}

// UnmountUnder lazily unmounts everything mounted at or below dir, the
// later mounted first, so that dir can be removed without walking into a
// mount.
func UnmountUnder(dir string) error {
	points, err := Under(dir)
	if err != nil {
		return err
	}
	slices.Reverse(points)
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescape undoes mountinfo's octal escapes (\040 for a space, …).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
