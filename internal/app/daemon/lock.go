package daemon

// One daemon per state.
//
// A daemon's state is its data dir and the run dir that goes with it: the
// runtimes' container state, the API socket, and through them every
// sandbox. Two daemons on one state destroy each other's sandboxes (each
// takes the other's containers for leftovers), so:
//
//   - the data dir has a lock, held (flock) for as long as the daemon runs,
//     with the holder's pid in it: a second daemon on the data dir refuses
//     to start, naming it;
//   - the run dir belongs to one data dir, named in a file in it, made once
//     and never rewritten: a daemon on another data dir refuses it. The
//     default run dir is derived from the data dir, so that a second daemon
//     given only --data-dir gets a run dir of its own, not the first one's.
//     The claim outlives the daemon, as its sandboxes do; /run is emptied
//     at boot, with the containers.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Default data and run dirs.
const (
	defaultDataDir = "/var/lib/hutch"
	defaultRunDir  = "/run/hutch"
)

// runDirFor is the run dir of a data dir when none is configured: the
// default one for the default data dir, else one named after the data
// dir's path.
func runDirFor(dataDir string) string {
	if filepath.Clean(dataDir) == defaultDataDir {
		return defaultRunDir
	}
	sum := sha256.Sum256([]byte(filepath.Clean(dataDir)))
	return defaultRunDir + "-" + hex.EncodeToString(sum[:6])
}

// lockDataDir takes the data dir's lock for this process, or says which
// daemon holds it. The lock goes with the returned file: keep it open
// while serving.
func lockDataDir(dataDir string) (*os.File, error) {
	path := filepath.Join(dataDir, "daemon.lock")
	// #nosec G304 -- a file in the daemon's own data dir
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the data dir's lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path) // #nosec G304 -- as above
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("data dir %s is in use by another hutch daemon (%s): stop that one, or give this one its own --data-dir", dataDir, holder)
		}
		return nil, fmt.Errorf("lock the data dir: %w", err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write the data dir's lock: %w", err)
	}
	return f, nil
}

// claimRunDir makes runDir dataDir's, or checks that it is: a run dir
// claimed by another data dir is refused. The claim is a file made whole
// in one step (a link of a file already written), so a second daemon never
// reads half of one.
func claimRunDir(runDir, dataDir string) error {
	owner := filepath.Join(runDir, "data-dir")
	want := filepath.Clean(dataDir)
	for range 2 {
		// #nosec G304 -- a file in the daemon's own run dir
		b, err := os.ReadFile(owner)
		if err == nil {
			if got := strings.TrimSpace(string(b)); got != want {
				return fmt.Errorf("run dir %s belongs to the daemon of data dir %s: give this daemon its own --run-dir, or none (one is derived from --data-dir)", runDir, got)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("read the run dir's owner: %w", err)
		}
		tmp, err := os.CreateTemp(runDir, ".data-dir-")
		if err != nil {
			return fmt.Errorf("claim the run dir: %w", err)
		}
		_, err = tmp.WriteString(want + "\n")
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(tmp.Name(), owner)
		}
		_ = os.Remove(tmp.Name())
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("claim the run dir: %w", err)
		}
		// Another daemon claimed it first: read whose it is.
	}
	return fmt.Errorf("claim the run dir %s: its owner file keeps changing", runDir)
}
