package oci

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A runtime binary can still be in the making when the daemon starts:
// ./setup builds gVisor's runsc from source in the background (minutes on a
// fresh machine) and starts the daemon meanwhile. `make runsc` says so with
// a marker beside the binary it makes, BINARY.building, holding the process
// id of the build; while that process lives the backend is pending, not
// broken, and the core probes it again when a create asks for it.

// BuildingSuffix names the marker a build of a runtime binary keeps beside
// it while it runs.
const BuildingSuffix = ".building"

// building says whether binary is being built, and for how long: its
// marker is there and names a live process.
func building(binary string) (time.Duration, bool) {
	if !strings.ContainsRune(binary, '/') {
		return 0, false // looked up in PATH: no place for a marker
	}
	marker := binary + BuildingSuffix
	b, err := os.ReadFile(marker) // #nosec G304 -- beside the daemon's own runtime binary
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	// A marker left by a build that was killed names a process that is
	// gone (or, much later, another one: the build then counts as dead
	// only once its marker is older than any build takes).
	if err := unix.Kill(pid, 0); err != nil && err != unix.EPERM {
		return 0, false
	}
	fi, err := os.Stat(marker)
	if err != nil {
		return 0, false
	}
	since := time.Since(fi.ModTime())
	if since > maxBuild {
		return 0, false
	}
	return since, true
}

// maxBuild bounds how long a build of a runtime binary is believed.
const maxBuild = time.Hour

// pendingReason says that binary is being built, and how long it has taken.
func pendingReason(binary string, since time.Duration) string {
	return fmt.Sprintf("%s is being built (for %s so far, by make runsc); sandboxes of this runtime wait for it", binary, since.Round(time.Second))
}
