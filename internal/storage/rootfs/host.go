package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// hostSystemDirs are the host directories a host-template sandbox sees
// read-only. Where the host has a symlink (/bin → usr/bin on merged-/usr
// systems) the skeleton has the same symlink.
var hostSystemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// hostEtc is the part of the host's /etc a sandbox sees: what programs need
// to run (dynamic linker cache, alternatives, certificates, locale and shell
// defaults). Left out on purpose: accounts and secrets (passwd, shadow,
// group, gshadow, sudoers, ssh), package manager credentials (npmrc,
// pip.conf, apt auth), and host identity (hostname, hosts, machine-id);
// passwd, group, hosts and hostname are made per sandbox instead.
//
// They are copied into the skeleton, not bound: some 700 files, 1 MB here,
// where a bind each (35) made every sandbox's start 35 idmapped clones and
// 35 mounts more, which the kernel serialises: 20 clients created and
// deleted 1.6× fewer sandboxes a second with them (bench -soak's floor).
// What is copied is what any host user may read (a directory such as
// /etc/ssl/private is left out), and its content names the skeleton's
// version: a host that changes it gets a new skeleton at the daemon's next
// start, as one that gains or loses an entry does.
var hostEtc = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"debian_version", "environment", "ethertypes",
	"fonts", // fontconfig's configuration: charts and PDFs find the fonts
	"gai.conf", "host.conf",
	"inputrc", "issue", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"locale.alias", "localtime", "login.defs", "magic", "magic.mime",
	"matplotlibrc", // Debian's matplotlib reads its defaults there, and fails without
	"mime.types", "networks", "nsswitch.conf", "os-release", "perl", "profile",
	"profile.d", "protocols", "python3", "rpc", "services", "skel", "ssl",
	"terminfo", "timezone", "vim",
}

// skeletonDir is a directory every sandbox root has.
type skeletonDir struct {
	path string
	mode os.FileMode
	uid  int
}

var skeletonDirs = []skeletonDir{
	{"dev", 0o755, 0}, {"proc", 0o555, 0}, {"sys", 0o555, 0}, {"run", 0o755, 0},
	{"etc", 0o755, 0}, {"tmp", os.ModeSticky | 0o777, 0}, {"var", 0o755, 0}, {"var/tmp", os.ModeSticky | 0o777, 0},
	{"var/cache", 0o755, 0}, {"var/lib", 0o755, 0}, {"var/log", 0o755, 0},
	{"root", 0o700, 0}, {"home", 0o755, 0}, {"mnt", 0o755, 0}, {"opt", 0o755, 0},
	{"srv", 0o755, 0}, {"media", 0o755, 0},
	{"home/user", 0o755, UserUID}, {"home/user/workspace", 0o755, UserUID},
	{".hutch", 0o755, 0},
}

// skeletonFiles are the files every sandbox root has: its accounts, and
// empty mount points and per-sandbox files (written at create).
var skeletonFiles = map[string]string{
	"etc/passwd": "root:x:0:0:root:/root:/bin/bash\n" +
		fmt.Sprintf("%s:x:%d:%d:%s:%s:/bin/bash\n", UserName, UserUID, UserGID, UserName, UserHome) +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"etc/group": "root:x:0:\ntty:x:5:\n" +
		fmt.Sprintf("%s:x:%d:\n", UserName, UserGID) +
		"nogroup:x:65534:\n",
	".hutch/hutch": "",
	"etc/hosts":    "",
	"etc/hostname": "",
}

// ensureHost makes the host template's skeleton root under dir unless it is
// already there. hostRoot is "/" except in tests. Each layout of the host gets
// its own directory named by its hash, built beside and renamed into place:
// a crash never leaves half a template, and a root that running sandboxes use
// as their lower layer is never changed under them.
//
// It also returns the binds that a snapshot made on a skeleton before
// skeletonVersion 5 needs (see plan.etcBinds).
func ensureHost(dir, hostRoot string) (_ Template, oldSnapshotBinds []backend.Bind, _ error) {
	plan := hostPlan(hostRoot)
	t, err := plan.ensure(dir)
	return t, append(slices.Clone(plan.binds), plan.etcBinds...), err
}

// ensure makes the skeleton of plan under dir unless it is there.
func (plan plan) ensure(dir string) (Template, error) {
	final := filepath.Join(dir, plan.version())
	t := Template{Name: HostName, Version: plan.version(), RootDir: filepath.Join(final, "rootfs"), Binds: plan.binds}
	if _, err := os.Stat(final); err == nil {
		return t, nil
	}
	// #nosec G301 -- sandbox users must traverse template roots
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return t, err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return t, err
	}
	if err := plan.build(filepath.Join(tmp, "rootfs")); err != nil {
		_ = os.RemoveAll(tmp) // best effort: the build error is what matters
		return t, err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.RemoveAll(tmp) // best effort: the build error is what matters
		return t, err
	}
	return t, nil
}

// entry is one host path mirrored into the skeleton.
type entry struct {
	path   string // relative to the root
	kind   string // "dir", "file" (mount points), "link", "copydir" or "copy"
	target string // symlink target
	mode   os.FileMode
	data   []byte // "copy": the content, as read when planning
}

type plan struct {
	entries []entry
	binds   []backend.Bind
	// etcBinds are the binds of hostEtc's entries that skeletons before
	// skeletonVersion 5 had instead of copies: snapshots made on one
	// still need them (see Info.onHost).
	etcBinds []backend.Bind
}

// hostPlan reads what the host has of the paths above.
func hostPlan(hostRoot string) plan {
	var p plan
	add := func(rel string) {
		host := filepath.Join(hostRoot, rel)
		fi, err := os.Lstat(host)
		if err != nil {
			return
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return
			}
			p.entries = append(p.entries, entry{path: rel, kind: "link", target: target})
		case fi.IsDir():
			p.entries = append(p.entries, entry{path: rel, kind: "dir"})
			p.binds = append(p.binds, backend.Bind{Source: host, Destination: "/" + rel})
		case fi.Mode().IsRegular():
			p.entries = append(p.entries, entry{path: rel, kind: "file"})
			p.binds = append(p.binds, backend.Bind{Source: host, Destination: "/" + rel})
		}
	}
	for _, d := range hostSystemDirs {
		add(d)
	}
	etc := append([]string(nil), hostEtc...)
	sort.Strings(etc)
	for _, e := range etc {
		rel := "etc/" + e
		p.copyTree(hostRoot, rel)
		if fi, err := os.Lstat(filepath.Join(hostRoot, rel)); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
			p.etcBinds = append(p.etcBinds, backend.Bind{Source: filepath.Join(hostRoot, rel), Destination: "/" + rel})
		}
	}
	return p
}

// copyTree plans the copy of the host's rel and what is below it: symlinks
// as they are, and the files and directories any host user may read.
func (p *plan) copyTree(hostRoot, rel string) {
	_ = filepath.WalkDir(filepath.Join(hostRoot, rel), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable: not copied
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		r, err := filepath.Rel(hostRoot, path)
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(path); err == nil {
				p.entries = append(p.entries, entry{path: r, kind: "link", target: target})
			}
		case fi.IsDir():
			if perm&0o005 != 0o005 {
				return filepath.SkipDir // not everyone's: /etc/ssl/private
			}
			p.entries = append(p.entries, entry{path: r, kind: "copydir", mode: perm})
		case fi.Mode().IsRegular() && perm&0o004 != 0:
			data, err := os.ReadFile(path) // #nosec G304 -- a world-readable file of hostEtc on the host
			if err == nil {
				p.entries = append(p.entries, entry{path: r, kind: "copy", mode: perm, data: data})
			}
		}
		return nil
	})
}

// skeletonVersion changes whenever the skeleton's fixed parts change.
// 5: hostEtc copied, not bound.
const skeletonVersion = "5"

// version names the plan: equal plans make equal roots.
func (p plan) version() string {
	h := sha256.New()
	_, _ = fmt.Fprintln(h, skeletonVersion) // a hash takes every write
	for _, e := range p.entries {
		_, _ = fmt.Fprintln(h, e.path, e.kind, e.target, e.mode, len(e.data))
		_, _ = h.Write(e.data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// build writes the skeleton root into root.
func (p plan) build(root string) error {
	// #nosec G301 -- the root directory sandbox users traverse
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for _, d := range skeletonDirs {
		path := filepath.Join(root, d.path)
		if err := os.MkdirAll(path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(path, d.mode); err != nil { // past the umask
			return err
		}
		if err := os.Lchown(path, d.uid, d.uid); err != nil {
			return err
		}
	}
	for f, content := range skeletonFiles {
		// #nosec G306 -- files sandbox users read (passwd, hosts, …)
		if err := os.WriteFile(filepath.Join(root, f), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, e := range p.entries {
		path := filepath.Join(root, e.path)
		var err error
		switch e.kind {
		case "link":
			err = os.Symlink(e.target, path)
		case "dir":
			// #nosec G301 -- a mount point in a root sandbox users traverse
			err = os.MkdirAll(path, 0o755)
		case "file":
			// #nosec G306 -- a mount point sandbox users read through
			err = os.WriteFile(path, nil, 0o644)
		case "copydir":
			if err = os.Mkdir(path, e.mode); err == nil {
				err = os.Chmod(path, e.mode) // past the umask
			}
		case "copy":
			if err = os.WriteFile(path, e.data, e.mode); err == nil {
				err = os.Chmod(path, e.mode)
			}
		}
		if err != nil {
			return fmt.Errorf("skeleton %s: %w", strings.TrimPrefix(e.path, "/"), err)
		}
	}
	return nil
}
