package rootfs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// The base system (debootstrap's result) is the same for every build of one
// suite from one mirror while the archive does not change, and making it is
// most of a small template's build: minutes of dpkg on a two-core host. So a
// build that has a package cache keeps the base system there, as a tar
// archive named after the archive's state (the hash of the suite's InRelease
// file), and the next build of the same suite and mirror unpacks it instead
// of running debootstrap again. A new InRelease (a point release) makes a new
// base system, which replaces the old one; a build whose mirror cannot be
// asked runs debootstrap, as without a cache.

// baseRecipe names how a base system is made. Changing debootstrap's
// arguments changes it, so that no base system made the old way is reused.
// 2: the Release checked against the suite's keyring (--force-check-gpg),
// the packages' scripts run in a sandbox (--foreign, then --second-stage).
const baseRecipe = "minbase/2"

// baseSystem makes the build's root the base system of opts' suite: from the
// base kept in opts.CacheDir when there is one for the archive's state,
// otherwise with debootstrap, keeping its result for the next build.
func baseSystem(ctx context.Context, bin, keyring string, b *Build, opts DebianOptions, progress func(Progress)) error {
	if opts.CacheDir == "" {
		return debootstrap(ctx, bin, keyring, b, opts, progress)
	}
	if err := os.MkdirAll(filepath.Join(opts.CacheDir, "base"), 0o700); err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	// debootstrap downloads into the cache in place, and the base systems
	// are made there: builds that share it (another daemon's too) take
	// turns. apt-get's downloads are the build's own until renamed into
	// the cache whole.
	unlock, err := lockDir(ctx, opts.CacheDir)
	if err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	kept := keptBase(ctx, opts)
	if _, err := os.Stat(kept); kept != "" && !opts.Fresh && err == nil {
		// A kept base is never changed, only replaced by rename: other
		// builds may unpack it at the same time.
		unlock()
		progress(Progress{Step: "base", Message: "Unpacking the base system of " + opts.Suite + " kept from an earlier build"})
		return unpackBase(ctx, kept, b.Root())
	}
	defer unlock()
	if err := debootstrap(ctx, bin, keyring, b, opts, progress); err != nil {
		return err
	}
	if kept != "" {
		progress(Progress{Step: "base", Message: "Keeping the base system of " + opts.Suite + " for later builds"})
		// Not keeping it costs the next build time, not this one its
		// result: the build goes on.
		_ = keepRoot(ctx, b.Root(), kept)
	}
	return nil
}

// keptBase is where the base system of opts' suite and mirror, at the
// archive's current state, is kept; "" when the mirror does not say its
// state (unreachable, or no InRelease file).
func keptBase(ctx context.Context, opts DebianOptions) string {
	release, err := archiveState(ctx, opts.Mirror, opts.Suite)
	if err != nil {
		return ""
	}
	mirror := sha256.Sum256([]byte(opts.Mirror))
	state := sha256.Sum256([]byte(baseRecipe + "\n" + release))
	return filepath.Join(opts.CacheDir, "base", fmt.Sprintf("%s-%s-%x-%x.tar", opts.Suite, runtime.GOARCH, mirror[:6], state[:6]))
}

// archiveState is the hash of the suite's InRelease file on mirror, which
// changes whenever the suite's packages do.
func archiveState(ctx context.Context, mirror, suite string) (string, error) {
	body, err := fetch(ctx, strings.TrimSuffix(mirror, "/")+"/dists/"+suite+"/InRelease", "", 16<<20)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(body)), nil
}

// fetch GETs url (with accept, when not empty), within 30 seconds, and
// returns the first limit bytes of its body; an answer other than 200 is
// an error.
func fetch(ctx context.Context, url, accept string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}

// keepRoot archives root at path (written aside, then renamed into place)
// and removes the archives it replaces: those named the same up to the
// last "-" and of the same length (a base system of the same suite and
// mirror, a kept build of the same template), and their locks.
func keepRoot(ctx context.Context, root, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".new-*.tar")
	if err != nil {
		return err
	}
	_ = tmp.Close()
	if err := runTar(ctx, "--create", "--file", tmp.Name(), "--directory", root, "."); err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	prefix := path[:strings.LastIndex(path, "-")+1]
	older, err := filepath.Glob(prefix + "*.tar")
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range older {
		if o != path && len(o) == len(path) {
			errs = append(errs, os.Remove(o), ignoreMissing(os.Remove(o+".lock")))
		}
	}
	return errors.Join(errs...)
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// unpackBase unpacks a kept base system into root, which it makes.
func unpackBase(ctx context.Context, path, root string) error {
	// #nosec G301 -- a template root, which sandbox users traverse
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	if err := runTar(ctx, "--extract", "--file", path, "--directory", root, "--same-owner", "--same-permissions"); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("template build interrupted: %w", context.Cause(ctx))
		}
		return fmt.Errorf("unpack the kept base system %s: %w", filepath.Base(path), err)
	}
	return nil
}

// runTar runs GNU tar with args and the options that keep a root whole:
// numeric owners (the host's names are not the root's), extended attributes
// (file capabilities) and device nodes.
func runTar(ctx context.Context, args ...string) error {
	args = append(args, "--numeric-owner", "--xattrs", "--xattrs-include=*")
	// #nosec G204 -- paths Hutch made
	out, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tar: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
