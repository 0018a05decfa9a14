package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/oci"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// reference is what the runc peer copies from a real Hutch sandbox, so that
// it starts the very same container Hutch starts: the bundle's config.json,
// the template its root is made from, and the files Hutch writes into the
// sandbox's writable layer before starting it (/etc/passwd, hosts, …).
type reference struct {
	spec  *specs.Spec
	dir   string // the Hutch sandbox's bundle directory
	lower string // overlay lowerdir: the template root
	files []layerFile

	// With a user namespace (runc): Hutch's lowerdir and bind sources were
	// idmapped clones of the template's root and binds, made again for
	// each bundle through userns, a namespace with the same mapping.
	userns *os.File
	binds  []backend.Bind
}

// layerFile is one file or directory of the writable layer.
type layerFile struct {
	rel      string
	dir      bool
	data     []byte
	mode     fs.FileMode
	uid, gid int
}

// loadReference reads the bundle of the live sandbox whose directory is dir,
// made from template tmpl.
func loadReference(dir string, tmpl rootfs.Template) (*reference, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("read reference bundle: %w", err)
	}
	ref := &reference{spec: new(specs.Spec), dir: dir}
	if err := json.Unmarshal(b, ref.spec); err != nil {
		return nil, fmt.Errorf("decode reference config.json: %w", err)
	}
	if ref.spec.Root == nil || ref.spec.Process == nil || ref.spec.Linux == nil {
		return nil, errors.New("reference config.json lacks root, process or linux")
	}
	// The peers get a network namespace of their own with loopback only
	// (runsc: --network=none): the link to a router and the daemon's
	// listeners are Hutch's, and row (h) measures what they cost.
	for i := range ref.spec.Linux.Namespaces {
		if ref.spec.Linux.Namespaces[i].Type == specs.NetworkNamespace {
			ref.spec.Linux.Namespaces[i].Path = ""
		}
	}
	m, err := mountinfo.Find(filepath.Join(dir, ref.spec.Root.Path))
	if err != nil {
		return nil, err
	}
	ref.lower = overlayOption(m.SuperOpts, "lowerdir")
	upper := overlayOption(m.SuperOpts, "upperdir")
	if m.FSType != "overlay" || ref.lower == "" || upper == "" {
		return nil, fmt.Errorf("reference root is %s (%s), not an overlay", m.FSType, m.SuperOpts)
	}
	if ref.files, err = readLayer(upper); err != nil {
		return nil, fmt.Errorf("read reference writable layer: %w", err)
	}
	if ids := ref.spec.Linux.UIDMappings; len(ids) > 0 {
		ref.lower, ref.binds = tmpl.RootDir, tmpl.Binds
		if ref.userns, err = oci.NewUserns(ids[0].HostID); err != nil {
			return nil, err
		}
	}
	return ref, nil
}

func (r *reference) close() {
	if r.userns != nil {
		_ = r.userns.Close()
	}
}

// readLayer reads the regular files and directories of a writable layer.
func readLayer(root string) ([]layerFile, error) {
	var files []layerFile
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil || !(fi.IsDir() || fi.Mode().IsRegular()) {
			return nil // sockets, whiteouts: nothing Hutch writes before start
		}
		rel, _ := filepath.Rel(root, path)
		f := layerFile{rel: rel, dir: fi.IsDir(), mode: fi.Mode().Perm(), uid: int(st.Uid), gid: int(st.Gid)}
		if !f.dir {
			if f.data, err = os.ReadFile(path); err != nil {
				return err
			}
		}
		files = append(files, f)
		return nil
	})
	return files, err
}

// bundle is one runc peer's bundle: a fresh overlay of the same template,
// the same writable-layer files, and the reference config with only what
// must differ changed.
type bundle struct {
	dir    string
	rootfs string
}

// prepare makes the bundle in dir for container name, running args (nil:
// the agent, as in the reference). It is
// not timed: the Hutch side's equivalent work (mkdir, mount, write files and
// config) is inside its timing, so this favours runc slightly.
func (r *reference) prepare(dir, name, cgroupParent string, args []string) (*bundle, error) {
	b := &bundle{dir: dir, rootfs: filepath.Join(dir, r.spec.Root.Path)}
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{dir, upper, work, b.rootfs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return b, err
		}
	}
	if err := writeLayer(upper, r.files); err != nil {
		return b, err
	}
	lower := r.lower
	if r.userns != nil {
		// As Hutch does: the same path in the bundle, so that specFor
		// finds the binds' sources below it.
		lower = filepath.Join(dir, "idmapped")
		if err := oci.IDMapTree(r.lower, r.binds, lower, r.userns); err != nil {
			return b, err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := unix.Mount("overlay", b.rootfs, "overlay", unix.MS_NODEV, opts); err != nil {
		return b, fmt.Errorf("mount overlay: %w", err)
	}
	spec, err := r.specFor(dir, name, cgroupParent, args)
	if err != nil {
		return b, err
	}
	cfg, err := json.Marshal(spec)
	if err != nil {
		return b, err
	}
	return b, os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600)
}

func writeLayer(root string, files []layerFile) error {
	for _, f := range files { // WalkDir order: parents first
		path := filepath.Join(root, f.rel)
		var err error
		if f.dir {
			err = os.Mkdir(path, f.mode)
		} else {
			err = os.WriteFile(path, f.data, f.mode)
		}
		if err == nil {
			err = os.Chmod(path, f.mode)
		}
		if err == nil {
			err = os.Lchown(path, f.uid, f.gid)
		}
		if err != nil {
			return fmt.Errorf("copy writable layer: %w", err)
		}
	}
	return nil
}

// specFor is the reference config with three changes: the process is args
// instead of the agent (unless args is nil); the cgroup is the bench's own
// (same depth, same limits), since two containers cannot share one, also
// where the sandbox sees its cgroups through binds; and a
// bind mount from the reference sandbox's own directory (gVisor's agent
// socket dir, runc's idmapped clones) comes from the same place in this
// bundle. Namespaces, user ids, limits, capabilities, seccomp, masked paths
// are untouched.
func (r *reference) specFor(dir, name, cgroupParent string, args []string) (*specs.Spec, error) {
	b, err := json.Marshal(r.spec)
	if err != nil {
		return nil, err
	}
	s := new(specs.Spec) // a deep copy
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	if args != nil {
		s.Process.Args = args
	}
	s.Linux.CgroupsPath = "/" + cgroupParent + "/" + name
	for i, m := range s.Mounts {
		// The sandbox's own cgroups, bound in (oci.cgroupMounts): this
		// container's instead.
		if hier, ok := strings.CutSuffix(m.Source, r.spec.Linux.CgroupsPath); ok && m.Type == "bind" && strings.HasPrefix(hier, "/sys/fs/cgroup/") {
			s.Mounts[i].Source = hier + s.Linux.CgroupsPath
			continue
		}
		rel, err := filepath.Rel(r.dir, m.Source)
		if m.Type != "bind" || err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		src := filepath.Join(dir, rel)
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(src, 0o755); err != nil {
				return nil, err
			}
		}
		s.Mounts[i].Source = src
	}
	return s, nil
}

// remove unmounts the bundle's root and idmapped clones and deletes its
// directory.
func (b *bundle) remove() error {
	if err := mountinfo.UnmountUnder(b.dir); err != nil {
		return err // never RemoveAll through a mount
	}
	return os.RemoveAll(b.dir)
}

// overlayOption returns one key's value from overlay super options.
func overlayOption(opts, key string) string {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v
		}
	}
	return ""
}
