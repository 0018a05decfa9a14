package agent

import (
	"encoding/binary"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// accountWatch tells whether account files may have changed, by inotify:
// on each file's directory (a rename into place, an edit, a removal) and on
// the file itself (an edit through another path to it, as a file bound in
// from the host). Reading its pending events is one system call with no
// trip to a file system, where a stat under gVisor is a round trip to its
// gofer.
type accountWatch struct {
	fd     int
	broken bool // a watch was dropped, or events were lost: set a new one
}

// accountEvents are what makes a watched directory's or file's contents
// change, or the watch itself go (a directory renamed or removed).
const accountEvents = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

func newAccountWatch() (*accountWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &accountWatch{fd: fd}, nil
}

// add watches path and its directory (again: a file replaced by a rename
// is a new inode to watch); it reports whether both are watched.
func (w *accountWatch) add(path string) bool {
	for _, p := range []string{filepath.Dir(path), path} {
		if _, err := unix.InotifyAddWatch(w.fd, p, accountEvents); err != nil {
			return false
		}
	}
	return true
}

// changed reads the pending events and reports whether there were any. A
// watch dropped (IN_IGNORED: its file or directory is gone) or events lost
// (a full queue) also mark it broken.
func (w *accountWatch) changed() bool {
	var buf [4096]byte
	seen := false
	for {
		n, err := unix.Read(w.fd, buf[:])
		if errors.Is(err, unix.EAGAIN) {
			return seen
		}
		if err != nil || n <= 0 {
			w.broken = true
			return true
		}
		seen = true
		// struct inotify_event: wd, mask, cookie, len, then len bytes of name.
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			if mask&(unix.IN_IGNORED|unix.IN_Q_OVERFLOW|unix.IN_MOVE_SELF|unix.IN_DELETE_SELF) != 0 {
				w.broken = true
			}
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
		}
	}
}

func (w *accountWatch) close() { _ = unix.Close(w.fd) }
