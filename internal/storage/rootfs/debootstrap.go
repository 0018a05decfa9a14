package rootfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// A Debian base system is made in debootstrap's two stages, and only the
// first runs on the host. It downloads the suite's packages and unpacks
// them into the root (--foreign: no package's script runs), having checked
// the suite's Release file against the suite's own archive keyring, named
// by debootstrap's script for the suite: --keyring with --force-check-gpg,
// so that a Release not signed by that keyring stops the build, as does a
// suite whose keyring the host does not have (without them debootstrap
// only warns and goes on unchecked). The packages are checked against the
// signed Release by their hashes, as are those of its cache.
//
// The second stage, which configures the packages (their maintainer
// scripts, as root of the root), runs debootstrap's copy in the root, in a
// sandbox of it that the build's Runner makes, as apt-get runs later.

// debootstrapDir is where debootstrap's scripts are: where debootstrap
// itself looks.
func debootstrapDir() string {
	return orDefault(os.Getenv("DEBOOTSTRAP_DIR"), "/usr/share/debootstrap")
}

// suiteKeyring is the archive keyring that debootstrap's script for suite
// names (its "keyring FILE" line): what the suite's Release file must be
// signed with. A suite debootstrap has no script for, or whose keyring the
// host lacks, is refused.
func suiteKeyring(suite string) (string, error) {
	script := filepath.Join(debootstrapDir(), "scripts", suite) // suite is validSuite's
	// #nosec G304 -- debootstrap's own script, under a validated name
	b, err := os.ReadFile(script)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errdefs.InvalidArgument("suite %q: debootstrap does not know it (no %s); name a release such as bookworm", suite, script)
	}
	if err != nil {
		return "", fmt.Errorf("suite %s: %w", suite, err)
	}
	var keyring string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "keyring" {
			keyring = f[1]
		}
	}
	if keyring == "" {
		return "", errdefs.InvalidArgument("suite %q: debootstrap's script names no archive keyring to check its packages with", suite)
	}
	if fi, err := os.Stat(keyring); err != nil || !fi.Mode().IsRegular() {
		return "", errdefs.InvalidArgument("suite %q: its archive keyring %s is not on this host, so its packages cannot be checked; install the keyring's package on the host, or build a suite whose keyring it has", suite, keyring)
	}
	return keyring, nil
}

// debootstrap makes the build's root the base system of opts' suite: the
// first stage on the host, the second in a sandbox (see above). A build
// with a package cache calls it holding the cache's lock.
func debootstrap(ctx context.Context, bin, keyring string, b *Build, opts DebianOptions, progress func(Progress)) error {
	if err := firstStage(ctx, bin, keyring, b, opts, progress); err != nil {
		return err
	}
	return secondStage(ctx, b.Root(), opts, progress)
}

// firstStage runs debootstrap --foreign into the build's root. Its full
// log goes to build.log beside the root; its machine-readable progress
// (the protocol it speaks to debian-installer on descriptor 3) becomes
// progress calls.
func firstStage(ctx context.Context, bin, keyring string, b *Build, opts DebianOptions, progress func(Progress)) error {
	// Packages come later, from apt-get: debootstrap's own resolver does
	// not get through the dependencies of packages such as npm.
	args := []string{"--variant=minbase", "--debian-installer", "--foreign", "--keyring=" + keyring, "--force-check-gpg"}
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
	// debootstrap's children (wget, tar) go with it when the build is
	// interrupted.
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

// secondStageScript runs debootstrap's second stage in the root, speaking
// its protocol on the output. The sandbox's agent finds root's account in
// /etc/passwd, which base-passwd's scripts make in this stage: the stand-in
// the daemon put there goes first.
const secondStageScript = `rm -f /etc/passwd
exec 3>&1
exec /debootstrap/debootstrap --second-stage --debian-installer`

// secondStage configures the packages the first stage unpacked, running
// their maintainer scripts in a sandbox of the root.
func secondStage(ctx context.Context, root string, opts DebianOptions, progress func(Progress)) error {
	r, err := openRoot(root)
	if err != nil {
		return err
	}
	// The first stage leaves /proc a link to the host's, for a chroot: the
	// sandbox's runtime mounts its own proc on a directory only.
	err = r.removeAll("proc")
	if err == nil {
		err = r.mkdirAll("proc")
	}
	if err == nil {
		err = touchMountPoints(r)
	}
	if err == nil {
		err = r.writeFile("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	}
	if err = errors.Join(err, r.Close()); err != nil {
		return fmt.Errorf("prepare debootstrap's second stage: %w", err)
	}
	p := newInstallerParser(progress)
	err = opts.Run(ctx, root, RunStep{
		Argv: []string{"/bin/sh", "-c", secondStageScript, "debootstrap"},
		// container=lxc: debootstrap then knows it may not make device
		// nodes (the sandbox's root has no CAP_MKNOD; its /dev has
		// those it needs) and skips its check that it can.
		Env:    map[string]string{"HOME": "/root", "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8", "container": "lxc"},
		Output: p.line,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("template build interrupted: %w", context.Cause(ctx))
	case err != nil && p.err != "":
		return errdefs.InvalidArgument("debootstrap %s from %s, configuring the base system: %s", opts.Suite, opts.Mirror, p.err)
	case err != nil:
		return errdefs.Prefix(err, "debootstrap %s from %s, configuring the base system", opts.Suite, opts.Mirror)
	}
	return nil
}
