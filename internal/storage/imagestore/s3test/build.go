package s3test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// buildTimeout bounds a build: downloading the gateway's modules and
// compiling them takes about a minute and a half on two cores.
const buildTimeout = 10 * time.Minute

// systemCache is where the binary is kept when this process may write
// there (root, as on CI): one build for every user and checkout.
const systemCache = "/var/cache/hutch/s3"

// Binary returns the path of the gateway's binary, building it into the
// cache first if it is not there. Test binaries of several packages that
// start at once build it once: a lock file in the cache directory makes
// the others wait. An error that wraps errSkip means it cannot be built
// here.
func Binary(ctx context.Context) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", fmt.Errorf("%w: no cache directory to build %s@%s in: %v", errSkip, Module, Version, err)
	}
	bin := filepath.Join(dir, binName)
	if isExecutable(bin) {
		return bin, nil
	}
	// #nosec G304 -- the lock file of this package's own cache directory
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", dir, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if isExecutable(bin) { // built by another while this one waited
		return bin, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: no go command on PATH to build %s@%s with", errSkip, Module, Version)
	}
	// Built into a directory of its own and renamed into place: the binary
	// appears whole or not at all, even if this process is killed.
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	// #nosec G204 -- the go command, installing a pinned module version
	cmd := exec.CommandContext(ctx, gobin, "install", command+"@"+Version)
	// Outside any module (the version is the module's own go.mod's, not
	// this repository's), static, and with the Go that runs the tests.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=")
	began := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: cannot build the S3 server (go install %s@%s, %v): %v\n%s", errSkip, command, Version,
			time.Since(began).Round(time.Second), err, tail(string(out), 2000))
	}
	if err := os.Rename(filepath.Join(tmp, binName), bin); err != nil {
		return "", err
	}
	if os.Getenv("S3TEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "s3test: built %s@%s into %s in %v\n", Module, Version, bin, time.Since(began).Round(time.Second))
	}
	return bin, nil
}

// cacheDir is <cache>/<module>@<version>, made if missing: under
// /var/cache/hutch/s3 where it can be written, else under the user's cache
// directory.
func cacheDir() (string, error) {
	version := Module + "@" + Version
	dir := filepath.Join(systemCache, filepath.FromSlash(version))
	if err := os.MkdirAll(dir, 0o750); err == nil {
		return dir, nil
	}
	user, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(user, "hutch", "s3", filepath.FromSlash(version))
	return dir, os.MkdirAll(dir, 0o750)
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	if err != nil {
		return false
	}
	return info.Mode().IsRegular() && info.Mode()&0o111 != 0
}

// tail is the end of a build's output, where its error is.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
