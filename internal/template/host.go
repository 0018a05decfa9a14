package template

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hutchdev/hutch/internal/backend"
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
var hostEtc = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"debian_version", "environment", "ethertypes", "gai.conf", "host.conf",
	"inputrc", "issue", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"locale.alias", "localtime", "login.defs", "magic", "magic.mime",
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
func ensureHost(dir, hostRoot string) (Template, error) {
	plan := hostPlan(hostRoot)
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
	kind   string // "dir", "file" or "link"
	target string // symlink target
}

type plan struct {
	entries []entry
	binds   []backend.Bind
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
		add("etc/" + e)
	}
	return p
}

// skeletonVersion changes whenever the skeleton's fixed parts change.
const skeletonVersion = "4"

// version names the plan: equal plans make equal roots.
func (p plan) version() string {
	h := sha256.New()
	_, _ = fmt.Fprintln(h, skeletonVersion) // a hash takes every write
	for _, e := range p.entries {
		_, _ = fmt.Fprintln(h, e.path, e.kind, e.target)
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
		}
		if err != nil {
			return fmt.Errorf("skeleton %s: %w", strings.TrimPrefix(e.path, "/"), err)
		}
	}
	return nil
}
