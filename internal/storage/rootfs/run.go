package rootfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// RunStep is a command a build runs in a sandbox made from the root built so
// far: npm installs, and a Hutchfile's RUN lines.
type RunStep struct {
	Argv []string
	Env  map[string]string
	User string // "": root
	Cwd  string // "": /
	// Allow lists the host:port destinations the command may reach, through
	// an HTTP proxy named in its https_proxy and http_proxy variables.
	// None: no network at all.
	Allow []string
	// Output hears the command's output, stdout and stderr, line by line.
	Output func(line string)
	// Stdin, if not nil, is the command's standard input.
	Stdin *string
}

// A Runner runs step in a sandbox made from root, then applies what the
// step changed to root. A command that fails is an error ending with the
// last of its output. The sandbox is gone when it returns.
type Runner func(ctx context.Context, root string, step RunStep) error

// NpmRegistry is where npm packages come from.
const NpmRegistry = "registry.npmjs.org:443"

// validNpmPackage is an npm package name with an optional version or
// range: deno, @scope/name, typescript@5.6.2, bun@^1. It cannot start with
// '-', so it is never taken for an option.
var validNpmPackage = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[0-9A-Za-z.^~<>=*+-]+)?$`)

// checkNpm says why npm packages cannot be installed into a root made of
// debs, or nil.
func checkNpm(npm, debs []string) error {
	if len(npm) == 0 {
		return nil
	}
	for _, p := range npm {
		if !validNpmPackage.MatchString(p) {
			return errdefs.InvalidArgument("npm package %q is not an npm package name (name, @scope/name, name@version)", p)
		}
	}
	if !slices.Contains(debs, "npm") {
		return errdefs.InvalidArgument("npm packages are installed with npm, run in the template: add nodejs and npm to the Debian packages")
	}
	return nil
}

// npmInstall installs npm packages globally (into /usr/local), running npm
// in a sandbox of the root that reaches only the npm registry, with env,
// the template's own variables (see withBundleTrust). npm's downloads are
// kept in cacheDir (see npmcache.go); the rest of its cache goes with the
// build.
func npmInstall(ctx context.Context, root string, packages []string, env map[string]string, cacheDir string, run Runner, progress func(Progress)) (err error) {
	progress(Progress{Step: "npm", Message: "Installing " + strings.Join(packages, ", ") + " with npm"})
	if err := seedNpmCache(root, cacheDir); err != nil {
		return fmt.Errorf("npm's cached downloads: %w", err)
	}
	defer func() { err = errors.Join(err, keepNpmCache(root, cacheDir)) }()
	const script = `npm install --global --no-audit --no-fund --no-update-notifier --cache /` + npmCacheDir + ` "$@"
status=$?
rm -rf /root/.npm
exit $status`
	stepEnv := map[string]string{"HOME": "/root"}
	maps.Copy(stepEnv, env)
	err = run(ctx, root, RunStep{
		Argv:   append([]string{"/bin/sh", "-c", script, "npm-install"}, packages...),
		Env:    stepEnv,
		Allow:  []string{NpmRegistry},
		Output: func(line string) { progress(Progress{Step: "npm", Message: line}) },
	})
	if err != nil {
		return errdefs.Prefix(err, "npm install %s", strings.Join(packages, " "))
	}
	return nil
}

// mirrorAddress checks a Debian mirror's URL and returns the host:port that
// apt-get reaches it at.
func mirrorAddress(mirror string) (string, error) {
	u, err := url.Parse(mirror)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
		return "", errdefs.InvalidArgument("mirror %q must be an http:// or https:// URL, such as http://deb.debian.org/debian", mirror)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

// aptInstall installs Debian packages with apt-get, run in a sandbox of the
// root that reaches only the archives (host:port): dpkg's maintainer scripts run there,
// not on the host. Packages in cacheDir are not downloaded again; the ones
// downloaded are kept there by keepPackages.
func aptInstall(ctx context.Context, root string, packages, archives []string, cacheDir string, run Runner, progress func(Progress)) error {
	progress(Progress{Step: "index", Message: "Reading the package lists of " + strings.Join(archives, " and ")})
	if err := seedPackageCache(root, cacheDir); err != nil {
		return err
	}
	// APT::Status-Fd puts machine-readable progress lines in the output.
	// dpkg's --force-unsafe-io spares a sync per file unpacked: a build
	// cut short is thrown away whole, and its commit syncs the root once
	// (Build.Commit).
	// Not on descriptor 1 itself: apt-get closes its status descriptor in
	// dpkg, whose maintainer scripts would then fail to write anything.
	const script = `set -e
export DEBIAN_FRONTEND=noninteractive
apt-get -q update
exec 3>&1
apt-get -q install -y --no-install-recommends -o APT::Status-Fd=3 -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-unsafe-io "$@"`
	err := run(ctx, root, RunStep{
		Argv:   append([]string{"/bin/sh", "-c", script, "apt-install"}, packages...),
		Env:    map[string]string{"HOME": "/root", "LC_ALL": "C.UTF-8"},
		Allow:  archives,
		Output: func(line string) { aptProgress(line, progress) },
	})
	if err != nil {
		return errdefs.Prefix(err, "apt-get install %s", strings.Join(packages, " "))
	}
	return nil
}

// seedPackageCache links the packages of cacheDir into the root's apt
// archive, where apt-get finds them instead of downloading them. A cache on
// another file system is not used.
func seedPackageCache(root, cacheDir string) error {
	if cacheDir == "" {
		return nil
	}
	debs, err := filepath.Glob(filepath.Join(cacheDir, "*.deb"))
	if err != nil || len(debs) == 0 {
		return err
	}
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	archive, err := r.dir("var/cache/apt/archives")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // apt-get makes it, and downloads
	}
	if err != nil {
		return err
	}
	defer archive.Close()
	for _, deb := range debs {
		// #nosec G115 -- a descriptor
		err := unix.Linkat(unix.AT_FDCWD, deb, int(archive.Fd()), filepath.Base(deb), 0)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil // another file system: download instead
		}
	}
	return nil
}

// aptProgress turns a line of apt-get's output into progress: its status
// lines ("dlstatus:3:42.5:Retrieving file 3 of 9", "pmstatus:jq:80:
// Installing jq") and its errors and warnings. The rest repeats them.
func aptProgress(line string, progress func(Progress)) {
	kind, rest, _ := strings.Cut(line, ":")
	switch kind {
	case "dlstatus", "pmstatus":
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) < 3 {
			return
		}
		pct, err := strconv.ParseFloat(parts[1], 64)
		if err != nil {
			return
		}
		step := "download"
		if kind == "pmstatus" {
			step = "install"
		}
		progress(Progress{Step: step, Done: int(pct), Total: 100, Message: parts[2]})
	case "E", "W":
		progress(Progress{Step: "apt", Message: line})
	}
}
