package rootfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// DebianOptions says what a template built from Debian has, and from where.
type DebianOptions struct {
	// Suite is the release (bookworm, …); empty means the host's.
	Suite string
	// Mirror is the archive's URL; empty means the host's apt mirror.
	Mirror string
	// Packages are installed beyond the minimal base system (debootstrap's
	// minbase variant: dpkg, apt, bash, coreutils and what they need).
	Packages []string
	// CacheDir keeps downloaded packages between builds, and the base
	// system of each suite and mirror (see baseSystem).
	CacheDir string
	// Fresh uses nothing kept in CacheDir, neither a base system nor a
	// build (see Keep), and keeps what it makes as usual: debootstrap runs,
	// and every step after.
	Fresh bool
	// Debootstrap is the debootstrap binary; empty means "debootstrap".
	Debootstrap string
	// LocalCAs is the directory of certificate authorities the root trusts
	// beyond Debian's; empty means the host's own (HostLocalCAs).
	LocalCAs string
	// NpmPackages are installed with npm after the Debian packages, in a
	// sandbox of the root that Run makes.
	NpmPackages []string
	// Keep keeps the built root in CacheDir, under a key of everything it
	// is made from, and unpacks a kept one instead of building when the
	// key is kept (see keptbuild.go). For the default templates the
	// administrator builds.
	Keep bool
	// Run runs the steps whose code is not the daemon's in sandboxes of
	// the root: debootstrap's second stage (the base system's package
	// scripts), apt-get and npm. Required.
	Run Runner
}

// Progress is how far a build is.
type Progress struct {
	// Step names what is happening: "index" (the archive's package lists),
	// "download", "extract", "unpack", "configure", "finish", or
	// debootstrap's own phase name in lower case.
	Step string `json:"step"`
	// Done of Total units of the step (Total 0: not counted).
	Done  int `json:"done"`
	Total int `json:"total"`
	// Message says it for a person: "Retrieving libc6", …
	Message string `json:"message"`
}

// validPackage is a Debian package name (Debian Policy 5.6.1), so that a
// name can never be taken for an option.
var validPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// validSuite is a release name (bookworm, trixie-backports, …).
var validSuite = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// BuildDebian builds name from Debian with debootstrap and makes it the
// name's current version. progress, if not nil, hears each step. A build
// that fails or whose ctx ends leaves nothing behind.
func (s *Store) BuildDebian(ctx context.Context, name string, opts DebianOptions, progress func(Progress)) (_ Info, err error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	// Every argument is checked before what the host lacks is looked for:
	// bad input is the caller's to fix wherever the build would run.
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	for _, p := range opts.Packages {
		if !validPackage.MatchString(p) {
			return Info{}, errdefs.InvalidArgument("package name %q is not a Debian package name", p)
		}
	}
	if err := checkNpm(opts.NpmPackages, opts.Packages); err != nil {
		return Info{}, err
	}
	if opts.Suite == "" || opts.Mirror == "" {
		suite, mirror := HostDebian()
		opts.Suite = orDefault(opts.Suite, suite)
		opts.Mirror = orDefault(opts.Mirror, mirror)
	}
	if !validSuite.MatchString(opts.Suite) {
		return Info{}, errdefs.InvalidArgument("suite %q is not a release name such as bookworm", opts.Suite)
	}
	mirrorHost, err := mirrorAddress(opts.Mirror)
	if err != nil {
		return Info{}, err
	}
	// Every package's scripts run in a sandbox, the base system's too.
	if opts.Run == nil {
		return Info{}, errdefs.FailedPrecondition("a Debian template's package scripts run in sandboxes, and this build has none to run them in")
	}
	bin, err := exec.LookPath(orDefault(opts.Debootstrap, "debootstrap"))
	if err != nil {
		return Info{}, errdefs.Unavailable("debootstrap is not installed (apt-get install debootstrap; ./setup does): %v", err)
	}
	keyring, err := suiteKeyring(opts.Suite)
	if err != nil {
		return Info{}, err
	}
	b, err := s.Begin(name)
	if err != nil {
		return Info{}, err
	}
	defer func() { err = b.fail(ctx, err) }()
	kept, unlock, err := awaitKept(ctx, name, opts, progress)
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	if _, err := os.Stat(kept); kept != "" && !opts.Fresh && err == nil {
		progress(Progress{Step: "base", Message: "Unpacking " + name + " kept from an earlier build of the same packages"})
		if err := unpackBase(ctx, kept, b.Root()); err != nil {
			return Info{}, err
		}
	} else {
		if err := buildDebianRoot(ctx, name, b, bin, keyring, mirrorHost, opts, progress); err != nil {
			return Info{}, err
		}
		if kept != "" {
			progress(Progress{Step: "finish", Message: "Keeping " + name + " for later builds of the same packages"})
			// Not keeping it costs the next build time, not this one its
			// result: the build goes on.
			_ = keepRoot(ctx, b.Root(), kept)
		}
	}
	env, err := withBundleTrust(b.Root(), nil)
	if err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Commit(Info{Source: SourceDebian, Packages: opts.Packages, NpmPackages: opts.NpmPackages, Env: env, Suite: opts.Suite, Mirror: opts.Mirror})
}

// buildDebianRoot makes b's root from Debian as opts say: the base
// system, the sandbox user and the host's extra certificate authorities,
// the packages, the npm packages.
func buildDebianRoot(ctx context.Context, name string, b *Build, bin, keyring, mirrorHost string, opts DebianOptions, progress func(Progress)) error {
	if err := baseSystem(ctx, bin, keyring, b, opts, progress); err != nil {
		return err
	}
	progress(Progress{Step: "finish", Message: "Adding the sandbox user"})
	if err := finishDebianRoot(b.Root()); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if err := addLocalCAs(b.Root(), orDefault(opts.LocalCAs, HostLocalCAs)); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	archives := []string{mirrorHost}
	if security := securityArchive(opts.Suite, opts.Mirror); security != "" {
		host, err := addSecuritySource(b.Root(), security, opts.Suite)
		if err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
		if host != mirrorHost {
			archives = append(archives, host)
		}
	}
	if len(opts.Packages) > 0 {
		if err := aptInstall(ctx, b.Root(), opts.Packages, archives, opts.CacheDir, opts.Run, progress); err != nil {
			return err
		}
	}
	// Before npm: its packages' install scripts are the build's own code.
	if err := keepPackages(b.Root(), opts.CacheDir); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	// What the packages made the root trust, its sandboxes' runtimes
	// trust, npm's install scripts first.
	env, err := withBundleTrust(b.Root(), nil)
	if err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if len(opts.NpmPackages) > 0 {
		if err := npmInstall(ctx, b.Root(), opts.NpmPackages, env, opts.CacheDir, opts.Run, progress); err != nil {
			return err
		}
	}
	progress(Progress{Step: "finish", Message: "Cleaning package caches"})
	if err := cleanPackageCaches(b.Root()); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if err := letPipInstall(b.Root()); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if err := letChromiumRun(b.Root()); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if err := layOutNoVNC(b.Root()); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	if err := letDesktopSuspend(b.Root()); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	return nil
}

func orDefault(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

// installerParser reads debootstrap's debian-installer protocol: blocks of
// lines, a head ("P: now end name", "I: name", "E: name", "W: name") with
// its arguments ("PA: …", "IA: …") and format ("PF: …", "IF: …").
type installerParser struct {
	progress func(Progress)
	cur      Progress
	kind     string // the block being read: "P", "I", "E" or "W"
	phase    string // debootstrap's name of the current phase
	newPhase bool   // the last P line began a phase
	args     []string
	err      string // the last error, for a person
}

func newInstallerParser(progress func(Progress)) *installerParser {
	return &installerParser{progress: progress, cur: Progress{Step: "start"}}
}

func (p *installerParser) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p.line(sc.Text())
	}
}

func (p *installerParser) line(line string) {
	tag, rest, ok := strings.Cut(line, ": ")
	if !ok {
		return
	}
	switch tag {
	case "P":
		// "P: done total NAME" starts a phase (its title follows in PF);
		// "P: done total" moves the current one on.
		f := strings.Fields(rest)
		if len(f) < 2 {
			return
		}
		done, err1 := strconv.Atoi(f[0])
		total, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return
		}
		p.cur.Done, p.cur.Total = done, total
		p.kind, p.args = "P", nil
		p.newPhase = len(f) > 2 && f[2] != p.phase
		if len(f) > 2 {
			p.phase, p.cur.Step = f[2], stepName(f[2])
			return // PF follows
		}
		p.progress(p.cur)
	case "I", "E", "W":
		p.kind, p.args = tag, nil
	case "PA", "IA", "EA", "WA":
		p.args = append(p.args, rest)
	case "PF":
		// A phase's title ("Extracting packages") comes with each of its
		// progress lines; it is the message only when the phase begins,
		// and the info lines within it ("Extracting libc6...") say more.
		if p.newPhase {
			p.cur.Message = format(rest, p.args)
		}
		p.progress(p.cur)
	case "IF":
		p.cur.Message = format(rest, p.args)
		p.progress(p.cur)
	case "EF":
		p.err = format(rest, p.args)
	}
}

// stepName turns debootstrap's phase names into the steps a person reads.
func stepName(name string) string {
	switch {
	case name == "DOWNREL", name == "DOWNRELSIG", name == "DOWNPKGS", name == "SIZEDEBS":
		return "index"
	case strings.HasPrefix(name, "DOWN"):
		return "download"
	case strings.HasPrefix(name, "EXTRACT"):
		return "extract"
	case strings.HasPrefix(name, "UNPACK"), name == "INSTCORE", name == "INSTBASE":
		return "unpack"
	case strings.HasPrefix(name, "CONF"):
		return "configure"
	}
	return strings.ToLower(name)
}

// format fills %s (and %d, …) in a debootstrap format with args in order.
func format(f string, args []string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] == '%' && i+1 < len(f) {
			i++
			if f[i] == '%' {
				b.WriteByte('%')
				continue
			}
			if len(args) > 0 {
				b.WriteString(args[0])
				args = args[1:]
			}
			continue
		}
		b.WriteByte(f[i])
	}
	return strings.TrimSpace(b.String())
}

// logTail returns the last lines of a build log, to go with an error.
func logTail(path string) string {
	// #nosec G304 -- the build's own log
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return ": " + strings.Join(lines, " | ")
}

// finishDebianRoot makes a debootstrapped root a Hutch template: the
// sandbox user and its workspace, and the mount points Hutch binds over.
func finishDebianRoot(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := addUser(r); err != nil {
		return err
	}
	for _, d := range []skeletonDir{
		{"home/user", 0o755, UserUID}, {"home/user/workspace", 0o755, UserUID}, {".hutch", 0o755, 0},
	} {
		if err := r.mkdirAll(d.path); err != nil {
			return err
		}
		if err := r.setMode(d.path, d.mode, d.uid, d.uid); err != nil {
			return err
		}
	}
	return touchMountPoints(r)
}

// touchMountPoints makes the files a sandbox of the root has bound over
// or written at its start, unless the root has them.
func touchMountPoints(r *rootDir) error {
	for _, f := range []string{".hutch/hutch", "etc/hosts", "etc/hostname"} {
		if err := r.mkdirAll(path.Dir(f)); err != nil {
			return err
		}
		// #nosec G302 -- mount points and per-sandbox files sandbox users read
		if err := r.touch(f, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// keepPackages moves the packages apt-get downloaded into the root into
// cacheDir, for the next build. It runs right after apt-get, before
// anything of the build's own runs in the root (npm's install scripts):
// what it takes is what apt-get checked against the archive's signed index,
// never a file such a script put there. A package the cache has already
// is not replaced, and one on another file system is not kept.
func keepPackages(root, cacheDir string) error {
	if cacheDir == "" {
		return nil
	}
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	const archives = "var/cache/apt/archives"
	debs, err := r.glob(archives, "*.deb")
	if err != nil || len(debs) == 0 {
		return err
	}
	from, err := r.dir(archives)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := os.Open(cacheDir)
	if err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	defer to.Close()
	for _, deb := range debs {
		if !deb.Type().IsRegular() {
			continue
		}
		// #nosec G115 -- descriptors
		err := unix.Renameat2(int(from.Fd()), deb.Name(), int(to.Fd()), deb.Name(), unix.RENAME_NOREPLACE)
		if err != nil && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.EXDEV) {
			return fmt.Errorf("keep downloaded package %s: %w", deb.Name(), err)
		}
	}
	return nil
}

// cleanPackageCaches leaves a root without package caches (a sandbox that
// wants packages runs apt-get update). What it removes may be links the
// build planted: they go, what they point at stays.
func cleanPackageCaches(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, g := range []struct{ dir, pattern string }{
		{"var/cache/apt/archives", "*.deb"}, {"var/cache/apt/archives/partial", "*"}, {"var/cache/apt", "*.bin"},
		{"var/lib/apt/lists", "*_*"}, {".", "debootstrap"},
	} {
		matches, err := r.glob(g.dir, g.pattern)
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := r.removeAll(path.Join(g.dir, m.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// letPipInstall removes Debian's PEP 668 marker (EXTERNALLY-MANAGED) from
// the root's Pythons, so that `pip install X` works in a sandbox as a user
// of E2B or Modal expects: as the sandbox user it installs into
// ~/.local (pip's user scheme, which a suspend keeps with the rest of the
// sandbox's files), as root into /usr/local; Debian's own packages in
// /usr/lib stay as they were. The sandbox is the boundary the marker
// stands in for on a shared system.
func letPipInstall(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	pythons, err := r.glob("usr/lib", "python3*")
	if err != nil {
		return fmt.Errorf("let pip install: %w", err)
	}
	for _, p := range pythons {
		if !p.IsDir() {
			continue // a link: what it points at is not the daemon's to change
		}
		if err := r.removeAll(path.Join("usr/lib", p.Name(), "EXTERNALLY-MANAGED")); err != nil {
			return fmt.Errorf("let pip install: %w", err)
		}
	}
	return nil
}

// letChromiumRun has Debian's chromium launcher, in a root that has it,
// start the browser without Chromium's own sandbox, as browsers in
// containers run: that sandbox needs a user namespace or its setuid helper,
// and a sandbox's seccomp filter and no_new_privs allow neither, so
// Chromium would refuse to start ("No usable sandbox!"). The sandbox is
// the boundary it stands in for, as for letPipInstall. Whatever starts
// /usr/bin/chromium gets it: agent-browser, Puppeteer, Selenium.
func letChromiumRun(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	const dir = "etc/chromium.d" // what the launcher sources
	if ok, err := r.isDir(dir); err != nil || !ok {
		return err
	}
	const flags = "# Hutch: the sandbox is the boundary; Chromium's own sandbox cannot start in it.\n" +
		`export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox"` + "\n"
	// #nosec G306 -- a launcher setting, no secret
	if err := r.writeFile(dir+"/hutch-no-sandbox", []byte(flags), 0o644); err != nil {
		return fmt.Errorf("let chromium run: %w", err)
	}
	return nil
}

// layOutNoVNC puts Debian's noVNC, in a root that has it, where E2B's
// desktop template has it and its Desktop SDK runs it from (`cd
// /opt/noVNC/utils && ./novnc_proxy … --web /opt/noVNC`): /opt/noVNC is a
// link to /usr/share/novnc, and novnc_proxy is on PATH too. Its page
// reads its version from a package.json, which Debian leaves out (a 404
// in every viewer's console): it is written from the package's version.
func layOutNoVNC(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	const share = "usr/share/novnc"
	if ok, err := r.isDir(share + "/utils"); err != nil || !ok {
		return err
	}
	for link, target := range map[string]string{
		"opt/noVNC":                 "/" + share,
		"usr/local/bin/novnc_proxy": "/" + share + "/utils/novnc_proxy",
	} {
		if err := r.mkdirAll(path.Dir(link)); err != nil {
			return fmt.Errorf("lay out noVNC: %w", err)
		}
		if err := r.symlink(target, link); err != nil {
			return fmt.Errorf("lay out noVNC: %w", err)
		}
	}
	status, err := r.readFile("var/lib/dpkg/status")
	if err != nil {
		return fmt.Errorf("lay out noVNC: %w", err)
	}
	pkg, _ := json.Marshal(map[string]string{"name": "novnc", "version": debianVersion(status, "novnc")})
	// #nosec G306 -- a version, no secret
	if err := r.writeFile(share+"/package.json", append(pkg, '\n'), 0o644); err != nil {
		return fmt.Errorf("lay out noVNC: %w", err)
	}
	return nil
}

// debianVersion is the upstream version of package pkg in dpkg's status
// file ("1:1.3.0-1" is 1.3.0), or "" when it is not there.
func debianVersion(status []byte, pkg string) string {
	for _, stanza := range strings.Split(string(status), "\n\n") {
		if !strings.HasPrefix(stanza, "Package: "+pkg+"\n") {
			continue
		}
		for _, line := range strings.Split(stanza, "\n") {
			if v, ok := strings.CutPrefix(line, "Version: "); ok {
				if _, after, found := strings.Cut(v, ":"); found {
					v = after
				}
				if i := strings.LastIndex(v, "-"); i > 0 {
					v = v[:i]
				}
				return v
			}
		}
	}
	return ""
}

// letDesktopSuspend has a desktop's session, in a root with Xfce, listen
// on unix sockets of the abstract namespace only, as its X server does
// (-nolisten unix): gVisor cannot checkpoint a socket bound on the
// sandbox's disk, so a desktop that made one could not be suspended with
// its memory and windows. D-Bus's session bus gets an abstract address
// instead of a socket in /tmp, and /tmp/.ICE-unix is a file, not a
// directory, so that the session manager's ICE listens on its abstract
// address alone (it makes the other in that directory, and goes on
// without it).
func letDesktopSuspend(root string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	if ok, err := r.isFile("usr/bin/xfce4-session"); err != nil || !ok {
		return err
	}
	const conf = "usr/share/dbus-1/session.conf"
	b, err := r.readFile(conf)
	if err != nil {
		return fmt.Errorf("let the desktop suspend: %w", err)
	}
	const tmpdir, abstract = "<listen>unix:tmpdir=/tmp</listen>", "<listen>unix:abstract=/tmp/dbus-session</listen>"
	if bytes.Contains(b, []byte(tmpdir)) {
		// #nosec G306 -- a configuration, no secret
		if err := r.writeFile(conf, bytes.Replace(b, []byte(tmpdir), []byte(abstract), 1), 0o644); err != nil {
			return fmt.Errorf("let the desktop suspend: %w", err)
		}
	}
	if err := r.removeAll("tmp/.ICE-unix"); err != nil {
		return fmt.Errorf("let the desktop suspend: %w", err)
	}
	// Root's, read-only, in sticky /tmp: the sandbox user cannot replace it.
	if err := r.touch("tmp/.ICE-unix", 0o444); err != nil {
		return fmt.Errorf("let the desktop suspend: %w", err)
	}
	return nil
}

// HostLocalCAs is where Debian keeps the certificate authorities a machine
// trusts beyond its distribution's: a company's own, or the one of a proxy
// that inspects TLS.
const HostLocalCAs = "/usr/local/share/ca-certificates"

// addLocalCAs copies the certificates (*.crt) in dir, and in its
// subdirectories, into the root's own /usr/local/share/ca-certificates, so
// that a template built behind a TLS-inspecting proxy trusts what the host
// trusts: ca-certificates, when installed, adds them to the root's bundle.
// A missing dir is fine.
func addLocalCAs(root, dir string) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return filepath.SkipDir
		}
		if err != nil || !d.Type().IsRegular() || !strings.HasSuffix(p, ".crt") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		// #nosec G304 -- a certificate of the host's trust store
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		target := path.Join(strings.TrimPrefix(HostLocalCAs, "/"), filepath.ToSlash(rel))
		if err := r.mkdirAll(path.Dir(target)); err != nil {
			return err
		}
		// #nosec G306 -- certificates are public
		return r.writeFile(target, data, 0o644)
	})
}

// addUser adds the sandbox user (uid and gid 1000) to a root's account
// files, unless it has the user already.
func addUser(r *rootDir) error {
	b, err := r.readFile("etc/passwd")
	if err != nil {
		return err
	}
	if strings.Contains("\n"+string(b), "\n"+UserName+":") {
		return nil
	}
	for file, line := range map[string]string{
		"etc/passwd": fmt.Sprintf("%s:x:%d:%d:%s:%s:/bin/bash\n", UserName, UserUID, UserGID, UserName, UserHome),
		"etc/group":  fmt.Sprintf("%s:x:%d:\n", UserName, UserGID),
		"etc/shadow": UserName + ":*:20000:0:99999:7:::\n",
	} {
		err := r.appendFile(file, []byte(line), false)
		if errors.Is(err, fs.ErrNotExist) && file == "etc/shadow" {
			continue
		}
		if err != nil {
			return fmt.Errorf("add the sandbox user: %w", err)
		}
	}
	return nil
}

// securityArchive is the URL the host's apt gets suite's security updates
// from, when a build takes suite from the host's own mirror; "" when it
// has none, or the build has a mirror of its own (which may be all it can
// reach).
func securityArchive(suite, mirror string) string {
	if aptMirror(suite) != mirror {
		return ""
	}
	return aptMirror(suite + "-security")
}

// addSecuritySource has the root's apt fetch suite's security updates
// from url, as the host's does (debootstrap gives it the release's
// archive alone): a template's packages, a browser that reads the web
// among them, are then as patched as the host's. It returns url's host,
// which the package steps may reach.
func addSecuritySource(root, url, suite string) (string, error) {
	host, err := mirrorAddress(url)
	if err != nil {
		return "", err
	}
	r, err := openRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	line := fmt.Sprintf("deb %s %s-security main\n", url, suite)
	if err := r.appendFile("etc/apt/sources.list", []byte(line), true); err != nil {
		return "", fmt.Errorf("add the security archive: %w", err)
	}
	return host, nil
}

// HostDebian returns the host's release and the mirror its apt uses, the
// defaults of a build: /etc/os-release's VERSION_CODENAME, and the first
// archive URL in apt's sources that serves that release. Without them:
// Debian's stable release from deb.debian.org.
func HostDebian() (suite, mirror string) {
	suite, mirror = "bookworm", "http://deb.debian.org/debian"
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "VERSION_CODENAME="); ok && v != "" {
				suite = strings.Trim(v, `"`)
			}
		}
	}
	if m := aptMirror(suite); m != "" {
		mirror = m
	}
	return suite, mirror
}

// aptMirror finds the URL apt fetches suite from, in one-line
// (sources.list) or deb822 (*.sources) files.
func aptMirror(suite string) string {
	files := []string{"/etc/apt/sources.list"}
	for _, glob := range []string{"/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources"} {
		m, _ := filepath.Glob(glob) // a bad pattern is impossible here
		files = append(files, m...)
	}
	for _, f := range files {
		// #nosec G304 -- apt's own configuration
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if u := mirrorIn(string(b), suite); u != "" {
			return u
		}
	}
	return ""
}

// mirrorIn returns the URL of the first non-source entry of an apt sources
// file that serves suite.
func mirrorIn(text, suite string) string {
	// deb822: stanzas of "Key: value" lines, separated by blank lines.
	var uris, suites, types string
	flush := func() string {
		defer func() { uris, suites, types = "", "", "" }()
		if uris != "" && strings.Contains(" "+types+" ", " deb ") && strings.Contains(" "+suites+" ", " "+suite+" ") {
			return strings.Fields(uris)[0]
		}
		return ""
	}
	for line := range strings.Lines(text + "\n\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if line == "" {
			if u := flush(); u != "" {
				return u
			}
			continue
		}
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "deb" {
			// one-line: deb [options] uri suite components…
			rest := f[1:]
			if strings.HasPrefix(rest[0], "[") {
				for len(rest) > 0 && !strings.HasSuffix(rest[0], "]") {
					rest = rest[1:]
				}
				if len(rest) > 0 {
					rest = rest[1:]
				}
			}
			if len(rest) >= 2 && rest[1] == suite {
				return rest[0]
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "uris":
			uris = strings.TrimSpace(v)
		case "suites":
			suites = strings.TrimSpace(v)
		case "types":
			types = strings.TrimSpace(v)
		}
	}
	return ""
}

// lockDir takes dir's lock (an flock of dir/.lock), waiting for another
// holder, in this process or another, until ctx ends.
func lockDir(ctx context.Context, dir string) (func(), error) {
	return lockFile(ctx, filepath.Join(dir, ".lock"), func() {})
}

// lockFile takes an flock of path, which it makes, calling busy once if
// another holder has it, and waiting for that holder until ctx ends.
func lockFile(ctx context.Context, path string, busy func()) (func(), error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			return nil, err
		}
		if !waited {
			busy()
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
