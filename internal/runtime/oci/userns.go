package oci

// User namespaces for runc sandboxes.
//
// Without one, root in a runc sandbox is root on the host, held back only by
// capabilities, seccomp and namespaces: a kernel bug or a runc escape hands
// over the host. With one, the sandbox's ids 0–65535 are host ids nobody
// else uses (idBase upwards, a range of its own per sandbox), so a process
// that gets out is an unprivileged stranger on the host, and one sandbox's
// root is a stranger to another's files and processes too.
//
// The template's files are owned by host ids (root, 1000): seen from such a
// namespace they would belong to nobody, and root inside could not write a
// byte of /etc in its own writable layer. So the sandbox sees them through
// idmapped mounts (Linux 5.12+, overlayfs layers 5.19+): a clone of the
// template's root and of each bind, whose ids are shifted into the sandbox's
// range, with the file system itself untouched and shared. The writable
// layer is written with shifted ids directly.
//
// Making the mounts needs a user namespace with the sandbox's mapping before
// runc makes the sandbox's own: a process that made one (unshare(1), which
// then waits) gives it as /proc/PID/ns/user once the daemon mapped its ids,
// and is then killed. The two namespaces are not the same
// one, but mappings are all an idmapped mount takes from it. Such a
// namespace is kept for each range, as ranges are handed out again.
//
// The clones exist on the host only while the sandbox is being made: a
// tree at the sandbox's idmapped/ (the template's root, each bind's source
// mounted at its destination below), which the overlay takes its lower layer
// from and runc its binds. Cloning and idmapping the 30-odd mounts of the
// host template this way costs well under a millisecond; unmounting the
// tree once runc has started removes them all at once.
//
// Which range a sandbox has is recorded where it is needed anyway: its
// directory is owned by its root (runc, already in the namespace, must reach
// the root file system through it). Ranges are handed out host-wide, by
// claims in one directory every daemon shares (see idranges.go).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

const (
	// idBase is the first host id given to sandboxes: far above the ids
	// of users (1000+), of systemd's dynamic users (61184–65519) and of
	// the subordinate ranges useradd hands out (100000+).
	idBase = 1 << 30
	// idRange is the ids each sandbox has: 0–65535 inside.
	idRange = 1 << 16
	// idSlots is how many ranges there are: up to 2^31, as some tools read
	// ids as signed.
	idSlots = (1<<31 - idBase) / idRange
)

// idMapping is a sandbox's ids 0–65535 as host ids base onwards.
type idMapping struct{ base uint32 }

func (m idMapping) host(id int) int { return int(m.base) + id }

func (m idMapping) spec() []specs.LinuxIDMapping {
	return []specs.LinuxIDMapping{{ContainerID: 0, HostID: m.base, Size: idRange}}
}

// mappingOf returns the id range of the sandbox whose directory is dir, if
// it has one.
func mappingOf(dir string) (idMapping, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Uid < idBase {
		return idMapping{}, false
	}
	return idMapping{base: st.Uid}, true
}

// NewUserns returns a user namespace mapping ids 0–65535 to host ids base
// onwards, as an open file, for IDMapClone.
//
// The namespace is that of unshare(1), which makes it and runs cat in it,
// waiting on a pipe: the daemon writes the mapping, opens the namespace
// and ends the process. Not a child of the daemon's own made in a new
// namespace: Go forks the whole process for that (no vfork with
// CLONE_NEWUSER), copying its page tables and leaving each page it writes
// next to a copy-on-write fault, which took 3–5 ms with 60 MiB of heap and
// 37–40 ms with 250 MiB (a daemon of 1,000 sandboxes); unshare(1) took 3–4
// ms with either.
func NewUserns(base uint32) (_ *os.File, err error) {
	cmd := exec.Command("unshare", "--user", "cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// cat echoes what it reads: its answer says the namespace is made
	// (unshare makes it before it runs cat), its end that it never will be.
	echo, out, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer echo.Close()
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// No Pdeathsig: it follows the thread that forked, which a goroutine
	// locked to it and ending may end at any time. cat ends by itself at
	// its input's end, when the daemon does.
	err = cmd.Start()
	out.Close()
	if err != nil {
		return nil, fmt.Errorf("start a process in a new user namespace: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = stdin.Close()
		werr := cmd.Wait() // killed: its error says so
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w (unshare: %v: %s)", err, werr, bytes.TrimSpace(stderr.Bytes()))
		}
	}()
	if _, err := stdin.Write([]byte{'\n'}); err != nil {
		return nil, fmt.Errorf("a process in a new user namespace: %w", err)
	}
	if err := echo.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := echo.Read(make([]byte, 1)); err != nil {
		return nil, fmt.Errorf("unshare made no user namespace: %w", err)
	}
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	mapping := []byte(fmt.Sprintf("0 %d %d\n", base, idRange))
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(proc+"/"+f, mapping, 0); err != nil {
			return nil, fmt.Errorf("map the ids of a new user namespace: %w", err)
		}
	}
	ns, err := os.Open(proc + "/ns/user")
	if err != nil {
		return nil, fmt.Errorf("open user namespace: %w", err)
	}
	return ns, nil
}

// IDMapTree mounts at target, which it makes, a read-only copy of the
// directory root with a copy of each bind's source mounted at its
// destination below it, every file owner shifted into userns's mapping (see
// NewUserns). Each destination must exist in root (the host template has
// one for each of its binds). Unmounting target (MNT_DETACH) removes it all.
func IDMapTree(root string, binds []backend.Bind, target string, userns *os.File) (err error) {
	if err := os.Mkdir(target, 0o700); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	}()
	if err := attachIDMapped(root, 0, target, userns, true); err != nil {
		return err
	}
	for _, b := range binds {
		dest := filepath.Join(target, b.Destination)
		if err := attachIDMapped(b.Source, unix.AT_RECURSIVE, dest, userns, true); err != nil {
			return err
		}
	}
	return nil
}

// attachIDMapped clones the mount at source (with what is mounted below it
// when recursive is AT_RECURSIVE), idmaps the clone, read-only when asked,
// and attaches it at target. A clone can be idmapped only before it is
// attached.
//
// A read-only source on a filesystem that cannot be idmapped (overlayfs
// on kernels up to this one, as a pod's root is) is attached as it is:
// inside the sandbox its files are nobody's, as any file of an id outside
// the sandbox's range is, and still readable and runnable as their modes
// say. A writable one is an error: its files could not be written.
func attachIDMapped(source string, recursive uint, target string, userns *os.File, readOnly bool) error {
	tree, err := cloneIDMapped(source, recursive, userns, readOnly)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach idmapped mount of %s at %s: %w", source, target, err)
	}
	return nil
}

// cloneIDMapped clones the mount of source (and, with recursive
// AT_RECURSIVE, those below it) as a detached tree seen through userns's
// mapping (none when userns is nil), nosuid and nodev, read-only when
// asked: the tree's descriptor, for MoveMount to attach.
func cloneIDMapped(source string, recursive uint, userns *os.File, readOnly bool) (int, error) {
	tree, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|recursive)
	if err != nil {
		return -1, fmt.Errorf("clone mount of %s: %w", source, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if userns != nil {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(userns.Fd())
	}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr)
	if errors.Is(err, unix.EINVAL) && readOnly && userns != nil {
		attr.Attr_set, attr.Userns_fd = attr.Attr_set&^unix.MOUNT_ATTR_IDMAP, 0
		err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr)
	}
	if err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("idmap mount of %s: %w", source, err)
	}
	return tree, nil
}

// newUserNS gives the sandbox whose directory is dir an id range, makes the
// directory its root's, and returns a namespace with its mapping. On error
// the range is free again, or its claim names the directory, for Destroy
// to free.
func (r *Runtime) newUserNS(dir string) (*userNS, error) {
	ids, err := r.ids.take(dir)
	if err != nil {
		return nil, err
	}
	file, err := r.ids.userns(ids)
	if err != nil {
		return nil, err
	}
	return &userNS{ids: ids, file: file}, nil
}

// probeUserNS reports why sandboxes cannot run in user namespaces here, or
// nil: the kernel must make them and idmap mounts of the sandbox dir's file
// system, and the paths runc reaches from inside the namespace (the sandbox
// dir, the agent's executable) must be open to a stranger on the way.
func (r *Runtime) probeUserNS() error {
	// #nosec G301 -- searched by sandboxes' roots; each sandbox's own is 0700
	if err := os.MkdirAll(r.cfg.SandboxDir, 0o711); err != nil {
		return fmt.Errorf("create sandbox dir: %w", err)
	}
	for _, p := range []string{r.cfg.SandboxDir, filepath.Dir(r.cfg.AgentExe)} {
		if err := reachable(p); err != nil {
			return fmt.Errorf("%w: sandboxes run in user namespaces, whose root must reach it (chmod o+x)", err)
		}
	}
	ns, err := NewUserns(idBase)
	if err != nil {
		return err
	}
	defer ns.Close()
	// An idmapped clone, never attached: closing it is all the cleanup.
	tree, err := unix.OpenTree(unix.AT_FDCWD, r.cfg.SandboxDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone a mount (Linux 5.2+ needed): %w", err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmapped mounts of %s (Linux 5.19+ and a file system that supports them): %w", r.cfg.SandboxDir, err)
	}
	return nil
}

// reachable fails unless everyone may search dir and each directory above.
func reachable(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is closed to other users (mode %v)", p, fi.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}
