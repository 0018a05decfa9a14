package template

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/errdefs"
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
	// FreshBase runs debootstrap even when a base system of the archive's
	// current state is kept in CacheDir (and keeps the new one).
	FreshBase bool
	// Debootstrap is the debootstrap binary; empty means "debootstrap".
	Debootstrap string
	// LocalCAs is the directory of certificate authorities the root trusts
	// beyond Debian's; empty means the host's own (HostLocalCAs).
	LocalCAs string
	// NpmPackages are installed with npm after the Debian packages, in a
	// sandbox of the root that Run makes.
	NpmPackages []string
	Run         Runner
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
	if len(opts.Packages) > 0 && opts.Run == nil {
		return Info{}, errdefs.FailedPrecondition("packages are installed with apt-get in a sandbox, and this build has none to run it in")
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
	bin, err := exec.LookPath(orDefault(opts.Debootstrap, "debootstrap"))
	if err != nil {
		return Info{}, errdefs.Unavailable("debootstrap is not installed (apt-get install debootstrap; ./setup does): %v", err)
	}
	b, err := s.Begin(name)
	if err != nil {
		return Info{}, err
	}
	defer func() { err = b.fail(ctx, err) }()
	if err := baseSystem(ctx, bin, b, opts, progress); err != nil {
		return Info{}, err
	}
	progress(Progress{Step: "finish", Message: "Adding the sandbox user"})
	if err := finishDebianRoot(b.Root()); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	if err := addLocalCAs(b.Root(), orDefault(opts.LocalCAs, HostLocalCAs)); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	archives := []string{mirrorHost}
	if security := securityArchive(opts.Suite, opts.Mirror); security != "" {
		host, err := addSecuritySource(b.Root(), security, opts.Suite)
		if err != nil {
			return Info{}, fmt.Errorf("template %s: %w", name, err)
		}
		if host != mirrorHost {
			archives = append(archives, host)
		}
	}
	if len(opts.Packages) > 0 {
		if err := aptInstall(ctx, b.Root(), opts.Packages, archives, opts.CacheDir, opts.Run, progress); err != nil {
			return Info{}, err
		}
	}
	if len(opts.NpmPackages) > 0 {
		if err := npmInstall(ctx, b.Root(), opts.NpmPackages, opts.CacheDir, opts.Run, progress); err != nil {
			return Info{}, err
		}
	}
	progress(Progress{Step: "finish", Message: "Cleaning package caches"})
	if err := cleanPackageCaches(b.Root(), opts.CacheDir); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	if err := letPipInstall(b.Root()); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	if err := letChromiumRun(b.Root()); err != nil {
		return Info{}, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Commit(Info{Source: SourceDebian, Packages: opts.Packages, NpmPackages: opts.NpmPackages, Suite: opts.Suite, Mirror: opts.Mirror})
}

func orDefault(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

// debootstrap runs debootstrap into the build's root; a build with a
// package cache calls it holding the cache's lock. Its full log goes to
// build.log beside the root; its machine-readable progress (the protocol
// it speaks to debian-installer on descriptor 3) becomes progress calls.
func debootstrap(ctx context.Context, bin string, b *Build, opts DebianOptions, progress func(Progress)) error {
	// Packages come later, from apt-get: debootstrap's own resolver does
	// not get through the dependencies of packages such as npm.
	args := []string{"--variant=minbase", "--debian-installer"}
	if opts.CacheDir != "" {
		args = append(args, "--cache-dir="+opts.CacheDir)
	}
	args = append(args, opts.Suite, b.Root(), opts.Mirror)

	logFile, err := os.OpenFile(filepath.Join(b.dir, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	// #nosec G204 -- the arguments are validated names and URLs
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{pw} // descriptor 3
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8")
	// debootstrap's children (dpkg in a chroot, maintainer scripts) go
	// with it when the build is interrupted.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		return fmt.Errorf("start debootstrap: %w", err)
	}
	_ = pw.Close() // debootstrap has its copy: EOF when it ends
	p := newInstallerParser(progress)
	p.read(pr)
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("template build interrupted: %w", context.Cause(ctx))
	case waitErr != nil && p.err != "":
		return errdefs.InvalidArgument("debootstrap %s from %s: %s", opts.Suite, opts.Mirror, p.err)
	case waitErr != nil:
		return fmt.Errorf("debootstrap %s from %s: %w%s", opts.Suite, opts.Mirror, waitErr, logTail(filepath.Join(b.dir, "build.log")))
	}
	return nil
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
	if err := addUser(root); err != nil {
		return err
	}
	for _, d := range []skeletonDir{
		{"home/user", 0o755, UserUID}, {"home/user/workspace", 0o755, UserUID}, {".hutch", 0o755, 0},
	} {
		path := filepath.Join(root, d.path)
		if err := os.MkdirAll(path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(path, d.mode); err != nil {
			return err
		}
		if err := os.Lchown(path, d.uid, d.uid); err != nil {
			return err
		}
	}
	for _, f := range []string{".hutch/hutch", "etc/hosts", "etc/hostname"} {
		// #nosec G302 G304 -- mount points and per-sandbox files sandbox users read
		fh, err := os.OpenFile(filepath.Join(root, f), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	return nil
}

// cleanPackageCaches leaves a root without package caches (a sandbox that
// wants packages runs apt-get update): the packages apt-get downloaded go
// to cacheDir, for the next build, and the rest is removed.
func cleanPackageCaches(root, cacheDir string) error {
	if cacheDir != "" {
		debs, err := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb"))
		if err != nil {
			return err
		}
		for _, deb := range debs {
			if err := os.Rename(deb, filepath.Join(cacheDir, filepath.Base(deb))); err != nil {
				return fmt.Errorf("keep downloaded package: %w", err)
			}
		}
	}
	for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/archives/partial/*", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*", "debootstrap"} {
		matches, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
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
	markers, err := filepath.Glob(filepath.Join(root, "usr/lib/python3*/EXTERNALLY-MANAGED"))
	if err != nil {
		return err
	}
	for _, m := range markers {
		if err := os.Remove(m); err != nil {
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
	dir := filepath.Join(root, "etc/chromium.d") // what the launcher sources
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	const flags = "# Hutch: the sandbox is the boundary; Chromium's own sandbox cannot start in it.\n" +
		`export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox"` + "\n"
	// #nosec G306 -- a launcher setting, no secret
	if err := os.WriteFile(filepath.Join(dir, "hutch-no-sandbox"), []byte(flags), 0o644); err != nil {
		return fmt.Errorf("let chromium run: %w", err)
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
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipDir
		}
		if err != nil || !d.Type().IsRegular() || !strings.HasSuffix(path, ".crt") {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		// #nosec G304 -- a certificate of the host's trust store
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		target := filepath.Join(root, HostLocalCAs, rel)
		// #nosec G301 -- as Debian makes it
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		// #nosec G306 -- certificates are public
		return os.WriteFile(target, data, 0o644)
	})
}

// addUser adds the sandbox user (uid and gid 1000) to a root's account
// files, unless it has the user already.
func addUser(root string) error {
	passwd := filepath.Join(root, "etc/passwd")
	// #nosec G304 -- the build's own root
	b, err := os.ReadFile(passwd)
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
		path := filepath.Join(root, file)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && file == "etc/shadow" {
			continue
		}
		// #nosec G302 G304 -- the build's own root; the mode is kept
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("add the sandbox user: %w", err)
		}
		_, werr := f.WriteString(line)
		if err := errors.Join(werr, f.Close()); err != nil {
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
	// #nosec G302 G304 -- apt's sources, readable by all as apt wants, in the root being built
	f, err := os.OpenFile(filepath.Join(root, "etc/apt/sources.list"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("add the security archive: %w", err)
	}
	_, err = fmt.Fprintf(f, "deb %s %s-security main\n", url, suite)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
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
	fd, err := unix.Open(filepath.Join(dir, ".lock"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			return nil, err
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
