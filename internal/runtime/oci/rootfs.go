package oci

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// sandboxLayout names the parts of a sandbox's directory.
type sandboxLayout struct {
	dir       string // the sandbox's directory, holding the rest
	disk      string // link to the disk the writable layer is on (see disk.Pool)
	upper     string // the writable layer
	work      string // overlayfs' scratch dir
	idmapped  string // in a user namespace, the template and binds idmapped, while the runtime starts
	ownBinds  string // in a user namespace, the idmapped binds the template has no place for (volumes)
	rootfs    string // the merged root the container sees
	socketDir string // bind-mounted at AgentSocketDir when the agent listens itself; else ""
	socket    string // the agent's socket
}

// layout is the layout of sandbox dir. When the agent listens itself its
// socket is in socketDir, which the sandbox sees; else the socket is on the
// host only (see listenAgent).
func layout(dir string, agentListens bool) sandboxLayout {
	l := sandboxLayout{
		dir:      dir,
		disk:     filepath.Join(dir, "disk"),
		upper:    filepath.Join(dir, "disk", "upper"),
		work:     filepath.Join(dir, "disk", "work"),
		idmapped: filepath.Join(dir, "idmapped"),
		ownBinds: filepath.Join(dir, "idmapped-binds"),
		rootfs:   filepath.Join(dir, "rootfs"),
		socket:   filepath.Join(dir, "agent.sock"),
	}
	if agentListens {
		l.socketDir = filepath.Join(dir, "run")
		l.socket = filepath.Join(l.socketDir, AgentSocketName)
	}
	return l
}

func (r *Runtime) layout(id string) sandboxLayout { return layout(r.dir(id), r.cfg.AgentListens) }

// userNS is the user namespace a sandbox runs in: its mapping, and a
// namespace with that mapping for idmapped mounts (see userns.go).
type userNS struct {
	ids  idMapping
	file *os.File
}

// mount makes the sandbox's root: the read-only template lower below, the
// sandbox's own writable layer above, on its disk, holding files from the
// start. It returns the binds as the runtime is to make them.
//
// In a user namespace (ns not nil) the layer is written with the
// namespace's ids, and the template and the binds' sources are seen through
// idmapped clones, at l.idmapped (see userns.go), until unmountIDMapped.
func (l sandboxLayout) mount(lower string, binds []backend.Bind, files map[string]backend.File, ns *userNS) ([]backend.Bind, error) {
	if err := l.makeDirs(ns); err != nil {
		return nil, err
	}
	var ids idMapping // no user namespace: ids as they are
	if ns != nil {
		ids = ns.ids
	}
	if err := writeFiles(l.upper, lower, files, ids); err != nil {
		return nil, fmt.Errorf("write the sandbox's files: %w", err)
	}
	return l.mountOverlay(lower, binds, ns)
}

// makeDirs makes the directories a sandbox keeps from its create (or
// import) to its destroy, across suspends: its writable layer, overlayfs'
// scratch dir, the root's mount point and the agent's socket directory.
// The writable layer's top is the root directory of the sandbox's root:
// its root's (ns's, in a user namespace).
func (l sandboxLayout) makeDirs(ns *userNS) error {
	for _, d := range []string{l.upper, l.work, l.rootfs, l.socketDir} {
		if d == "" {
			continue
		}
		// #nosec G301 -- the sandbox root and its layers must be traversable by its users; the sandbox dir above is 0700
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if ns != nil {
		if err := os.Lchown(l.upper, ns.ids.host(0), ns.ids.host(0)); err != nil {
			return err
		}
	}
	return nil
}

// mountOverlay mounts the root over the writable layer as it is: at
// create, once the layer has its files; at resume, with what the sandbox
// left in it.
func (l sandboxLayout) mountOverlay(lower string, binds []backend.Bind, ns *userNS) ([]backend.Bind, error) {
	if ns != nil {
		// The template's binds have their places in its root (the host
		// template's /usr); others (volumes, which may be writable) are
		// idmapped each on its own.
		var inTree []backend.Bind
		for _, b := range binds {
			if _, err := os.Lstat(filepath.Join(lower, b.Destination)); err == nil && !b.Writable {
				inTree = append(inTree, b)
			}
		}
		if err := IDMapTree(lower, inTree, l.idmapped, ns.file); err != nil {
			return nil, err
		}
		// The overlay takes the tree's top only; the runtime binds the
		// clones below it.
		lower = l.idmapped
		binds = slices.Clone(binds)
		for i, b := range binds {
			if slices.Contains(inTree, b) {
				binds[i].Source = filepath.Join(l.idmapped, b.Destination)
				continue
			}
			own := filepath.Join(l.ownBinds, strconv.Itoa(i))
			if err := os.MkdirAll(own, 0o700); err != nil {
				return nil, err
			}
			if err := attachIDMapped(b.Source, unix.AT_RECURSIVE, own, ns.file, !b.Writable); err != nil {
				return nil, err
			}
			binds[i].Source = own
		}
	}
	if strings.ContainsAny(lower+l.upper+l.work, ",:") {
		return nil, fmt.Errorf("overlay paths must not contain ',' or ':'")
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, l.upper, l.work)
	if err := unix.Mount("overlay", l.rootfs, "overlay", unix.MS_NODEV, opts); err != nil {
		return nil, fmt.Errorf("mount overlay: %w", err)
	}
	return binds, nil
}

// unmountIDMapped removes the idmapped clones once the runtime has made its
// own mounts of them: the overlay and the sandbox's binds keep what they
// use, and the host need not carry each sandbox's clones. What is already
// gone is fine.
func (l sandboxLayout) unmountIDMapped() error {
	if err := unmount(l.idmapped); err != nil {
		return err
	}
	if err := os.Remove(l.idmapped); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	own, err := os.ReadDir(l.ownBinds)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range own {
		// Remove, not RemoveAll: a clone still there must not lose a
		// volume's files.
		p := filepath.Join(l.ownBinds, e.Name())
		if err := unmount(p); err != nil {
			return err
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return os.Remove(l.ownBinds)
}

// tmp returns the host path of the root's /tmp, made (sticky, writable by
// all) if the template has none.
func (l sandboxLayout) tmp() (string, error) {
	tmp := filepath.Join(l.rootfs, "tmp")
	fi, err := os.Lstat(tmp)
	switch {
	case err == nil && fi.IsDir():
		return tmp, nil
	case err == nil:
		return "", fmt.Errorf("/tmp in the template is not a directory")
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	// #nosec G301 -- /tmp is everyone's, sticky
	if err := os.Mkdir(tmp, 0o777); err != nil {
		return "", err
	}
	return tmp, os.Chmod(tmp, os.ModeSticky|0o777) // past the umask
}

// unmount undoes mount; an unmounted or missing root is fine.
func (l sandboxLayout) unmount() error { return unmount(l.rootfs) }

// unmount unmounts whatever is mounted at path, stacked mounts too,
// detaching lazily what is busy. A path that is no mount point, or missing,
// is fine.
func unmount(path string) error {
	for {
		err := unix.Unmount(path, 0)
		switch {
		case err == nil:
			continue // stacked mounts: unmount until none is left
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		case errors.Is(err, unix.EBUSY):
			if derr := unix.Unmount(path, unix.MNT_DETACH); derr != nil {
				return fmt.Errorf("unmount %s: %w", path, derr)
			}
			return nil
		default:
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
}

// writeFiles places the sandbox's own files in its writable layer upper
// before the overlay is mounted: plain files in a plain directory, cheaper
// than writing through the overlay, which would copy each parent directory
// up first. A parent the layer lacks is made as the template lower has it.
// Both are directories Hutch made, so paths are trusted. Owners are the
// sandbox's ids, made host ids by ids.
func writeFiles(upper, lower string, files map[string]backend.File, ids idMapping) error {
	paths := slices.Sorted(maps.Keys(files)) // parents before children
	for _, path := range paths {
		f := files[path]
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return fmt.Errorf("file path %q must be absolute and clean", path)
		}
		if err := makeParents(upper, lower, filepath.Dir(path), ids); err != nil {
			return err
		}
		host := filepath.Join(upper, path)
		var err error
		switch {
		case f.Dir:
			err = os.Mkdir(host, os.FileMode(f.Mode))
		case f.Link != "":
			err = os.Symlink(f.Link, host) // never followed here: nothing is placed under one
		default:
			err = os.WriteFile(host, f.Data, os.FileMode(f.Mode))
		}
		if err != nil && !(f.Dir && errors.Is(err, os.ErrExist)) {
			return err
		}
		if err := os.Lchown(host, ids.host(f.UID), ids.host(f.GID)); err != nil {
			return err
		}
		if f.Link != "" {
			continue
		}
		if err := os.Chmod(host, os.FileMode(f.Mode)); err != nil {
			return err
		}
	}
	return nil
}

// makeParents makes directory dir (absolute inside the sandbox) and its
// parents in upper, each with the mode and owner of the same directory in
// lower (root's 0755 when lower has none), shifted by ids.
func makeParents(upper, lower, dir string, ids idMapping) error {
	if dir == "/" {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(upper, dir)); err == nil {
		return nil
	}
	if err := makeParents(upper, lower, filepath.Dir(dir), ids); err != nil {
		return err
	}
	mode, uid, gid := os.FileMode(0o755), 0, 0
	if fi, err := os.Lstat(filepath.Join(lower, dir)); err == nil && fi.IsDir() {
		mode = fi.Mode() & (os.ModePerm | os.ModeSticky | os.ModeSetgid)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	host := filepath.Join(upper, dir)
	if err := os.Mkdir(host, mode); err != nil {
		return err
	}
	if err := os.Lchown(host, ids.host(uid), ids.host(gid)); err != nil {
		return err
	}
	return os.Chmod(host, mode) // past the umask, with the sticky bit
}

// cgroupRoot is where the host's cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// removeCgroups removes a container's cgroup directories in every hierarchy,
// for when the runtime could not (a container that died half-made), or
// after it did (what it left). Missing directories are fine. A cgroup is
// busy until the last of its killed processes has finished exiting, which
// on a loaded host comes well after the init process's exit: a busy one is
// tried again until ctx ends or cgroupBusyWait passes.
func removeCgroups(ctx context.Context, rel string) error {
	hierarchies, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil // no cgroup filesystem to clean
	}
	ctx, cancel := context.WithTimeout(ctx, cgroupBusyWait)
	defer cancel()
	var errs []error
	for _, h := range hierarchies {
		dir := filepath.Join(cgroupRoot, h.Name(), rel)
		if h.Name() == "pids" {
			// Its child first (see tenantCgroup).
			errs = append(errs, removeCgroup(ctx, filepath.Join(dir, tenantCgroup)))
		}
		errs = append(errs, removeCgroup(ctx, dir))
	}
	return errors.Join(errs...)
}

// removeCgroup removes the cgroup directory dir, killing what it finds in a
// busy one (see removeCgroups).
func removeCgroup(ctx context.Context, dir string) error {
	err := os.Remove(dir)
	for errors.Is(err, syscall.EBUSY) && ctx.Err() == nil {
		// Processes the runtime no longer knows, left by one of its
		// commands cut short (a daemon killed during runsc restore):
		// the cgroup is the sandbox's alone, and it is being removed.
		killCgroupProcs(dir)
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
			err = os.Remove(dir)
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// killCgroupProcs sends SIGKILL to every process in the cgroup dir.
func killCgroupProcs(dir string) {
	// #nosec G304 -- a cgroup of a sandbox of this daemon
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone meanwhile is fine
		}
	}
}

// cgroupBusyWait bounds the wait for a cgroup's processes to be gone.
const cgroupBusyWait = 10 * time.Second
