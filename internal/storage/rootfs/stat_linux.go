package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

type inodeBlocks struct {
	ino    uint64
	blocks int64
}

func sysStat(fi os.FileInfo) (inodeBlocks, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inodeBlocks{}, false
	}
	return inodeBlocks{ino: st.Ino, blocks: st.Blocks}, true
}

// outOfSpace reports whether a build in dir failed for want of disk: err
// says so, or its log does (a tool that hit ENOSPC and removed what it
// wrote), or the file system has less than 1 MiB left.
func outOfSpace(err error, dir string) bool {
	const enospc = "No space left on device"
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), enospc) {
		return true
	}
	// #nosec G304 -- the build's own log
	if b, rerr := os.ReadFile(filepath.Join(dir, "build.log")); rerr == nil && strings.Contains(string(b), enospc) {
		return true
	}
	var st syscall.Statfs_t
	if serr := syscall.Statfs(dir, &st); serr != nil {
		return false
	}
	return st.Bfree*uint64(st.Bsize) < 1<<20 // #nosec G115 -- a block size is positive
}
