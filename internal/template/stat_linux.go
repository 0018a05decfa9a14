package template

import (
	"os"
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
