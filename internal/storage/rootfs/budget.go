package rootfs

import (
	"archive/tar"
	"fmt"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A budget bounds the disk an unpacking takes: what an image's layers or
// an image archive put on disk. Their sizes are the image's to choose, and
// little is enough to ask for much (a compressed layer of zeros, a sparse
// file in a tar), so every entry is charged before it is written, and the
// first that would pass the bound stops the unpacking. What is charged is
// near what the file system takes: a file's size in whole blocks, a block
// for a directory, and something for every entry (its inode and name), so
// that many empty files are not free either.
type budget struct {
	max  int64 // bytes; 0: no bound
	used int64
}

// newBudget is a budget of maxBytes; nil (no bound) for 0.
func newBudget(maxBytes int64) *budget {
	if maxBytes <= 0 {
		return nil
	}
	return &budget{max: maxBytes}
}

const (
	blockSize = 4096
	entryCost = 512 // an inode and a name, at least
)

// charge takes what hdr's entry will take on disk from b, or says that it
// would pass the bound (errdefs.ErrResourceExhausted). A nil budget has
// no bound.
func (b *budget) charge(hdr *tar.Header) error {
	if b == nil {
		return nil
	}
	cost := (max(hdr.Size, 0) + blockSize - 1) / blockSize * blockSize
	if hdr.Typeflag == tar.TypeDir {
		cost = blockSize
	}
	cost = max(cost, entryCost)
	if cost > b.max-b.used {
		return errdefs.ResourceExhausted("it unpacks to more than %s, the most this build may put on disk (%q, of %s, would not fit)", mib(b.max), hdr.Name, mib(cost))
	}
	b.used += cost
	return nil
}

// mib says a size in MiB, rounded up.
func mib(n int64) string { return fmt.Sprintf("%d MiB", (n+1<<20-1)>>20) }
