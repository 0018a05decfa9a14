// Package rootfs provides the read-only roots sandboxes are made from:
// the built-in `host` template, whose system directories are read-only binds
// of the host's, and named templates built into the store (from Debian, a
// recipe or an image), each a complete root directory.
//
// The store's layout, under its directory:
//
//	host/<hash>/rootfs          the host template, one per layout of the host
//	<name>/<version>/rootfs     a built template's root, never changed
//	<name>/<version>/template.json
//	<name>/current              symlink to the version sandboxes get
//	.build-*                    builds under way; removed when the store opens
//
// A build happens beside the store and is renamed into place, then current
// is swapped by a rename too: a crash or an interrupted build never leaves
// half a template, and the root a running sandbox uses as its lower layer is
// never changed under it.
package rootfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Template is a root a sandbox is made from.
type Template struct {
	Name string
	// Version tells builds of one name apart; sandboxes keep the version
	// they were made from.
	Version string
	// RootDir is the read-only root directory.
	RootDir string
	// Binds are host paths the sandbox also sees, read-only.
	Binds []backend.Bind
	// Env is the environment its sandboxes start with (a Hutchfile's ENV).
	Env map[string]string
	// Memory is a snapshot's memory image, which sandboxes of
	// MemoryRuntime start from ("" when it has none).
	Memory, MemoryRuntime string
}

// Info describes a template, as `hutch template ls` and the API show it.
type Info struct {
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Source  string    `json:"source"` // SourceHost, SourceDebian, …
	Created time.Time `json:"created"`
	// Packages are what the build installed beyond the base system.
	Packages []string `json:"packages,omitempty"`
	// NpmPackages are what npm installed globally, after the packages.
	NpmPackages []string `json:"npm_packages,omitempty"`
	// Image and Digest are the OCI image it was made from ("archive" when
	// imported from a file).
	Image  string `json:"image,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Parent ("base@20261122T…") and Steps (its Hutchfile's lines) are a
	// Hutchfile's. Env is what sandboxes of it get: a Hutchfile's ENV, and
	// for a template built from Debian the variables that point runtimes
	// at its trusted authorities (see trust.go).
	Parent string            `json:"parent,omitempty"`
	Steps  []string          `json:"steps,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Sandbox is the sandbox a snapshot was made from; MemoryRuntime, the
	// runtime whose memory image of it the snapshot holds, if any.
	Sandbox       string `json:"sandbox,omitempty"`
	MemoryRuntime string `json:"memory_runtime,omitempty"`
	// Skeleton is the host skeleton's version (skeletonVersion) that a
	// snapshot standing on the host template was made on; "" before 5.
	Skeleton string `json:"skeleton,omitempty"`
	// Origin is the node it was copied from, among several
	// (internal/cluster); "" when it was made here.
	Origin string `json:"origin,omitempty"`
	// Suite and Mirror are the Debian release and mirror it came from.
	Suite  string `json:"suite,omitempty"`
	Mirror string `json:"mirror,omitempty"`
	// SizeBytes is the disk the root uses (for host: its skeleton only).
	SizeBytes int64 `json:"size_bytes"`
	// BuildSeconds is how long its build took, from Begin to Commit: what
	// the next build of the name is expected to take (see Builds).
	BuildSeconds float64 `json:"build_s,omitempty"`
}

// Where a template came from.
const (
	SourceHost   = "host"
	SourceDebian = "debian"
)

// HostName is the built-in template's name.
const HostName = "host"

// The sandbox user every template has.
const (
	UserName  = "user"
	UserUID   = 1000
	UserGID   = 1000
	UserHome  = "/home/user"
	Workspace = UserHome + "/workspace"
)

// WorkspacePath makes p absolute, relative paths meaning the workspace:
// how every call names a sandbox's files and working directories.
func WorkspacePath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(Workspace, p)
}

// UserOr is the user a call acts as: u, or the sandbox user.
func UserOr(u string) string {
	if u == "" {
		return UserName
	}
	return u
}

// validName is what a template may be called: it is a directory name and
// part of the CLI, so lower case, digits and . _ - only; a workspace's own
// templates are kept qualified with its name, NAME~WORKSPACE (see
// internal/trust/workspace). Compiled on first use (see workspace's validName).
var validName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}(~[a-z0-9][a-z0-9-]{0,62})?$`)
})

// CheckName says why name cannot be a new template's name, or nil.
func CheckName(name string) error {
	if !validName().MatchString(name) {
		return errdefs.InvalidArgument("template name %q: use 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", name)
	}
	if name == HostName {
		return errdefs.InvalidArgument("template name %q is the built-in host template's", name)
	}
	return nil
}

// Store finds and keeps templates in a directory.
type Store struct {
	dir  string
	host Template
	info Info // the host template's
	// oldSnapshotBinds are the binds of a snapshot made on a host
	// skeleton before skeletonVersion 5.
	oldSnapshotBinds []backend.Bind

	mu       sync.Mutex
	building map[string]*BuildUnderWay // by name
	// observers hear of changes of templates (see Observe). No element
	// is ever overwritten in place, so changed calls a copy of the slice
	// outside the lock.
	observers    []observer
	nextObserver int
}

// Open prepares the template directory: it makes the host template if
// needed and removes what interrupted builds left.
func Open(dir string) (*Store, error) {
	// #nosec G301 -- sandbox users must traverse template roots
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create template dir: %w", err)
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, ".build-*"))
	if err != nil {
		return nil, err
	}
	for _, b := range leftovers {
		if err := removeBuild(b); err != nil {
			return nil, fmt.Errorf("remove an interrupted build: %w", err)
		}
	}
	host, oldSnapshotBinds, err := ensureHost(filepath.Join(dir, HostName), "/")
	if err != nil {
		return nil, fmt.Errorf("prepare host template: %w", err)
	}
	s := &Store{dir: dir, host: host, oldSnapshotBinds: oldSnapshotBinds, building: map[string]*BuildUnderWay{}}
	s.info = Info{Name: HostName, Version: host.Version, Source: SourceHost, Skeleton: skeletonVersion}
	if fi, err := os.Stat(filepath.Dir(host.RootDir)); err == nil {
		s.info.Created = fi.ModTime().UTC()
	}
	s.info.SizeBytes, _ = DiskUsage(host.RootDir) // a size is only shown
	return s, nil
}

// Get returns the current version of a template.
func (s *Store) Get(name string) (Template, error) {
	if name == HostName {
		return s.host, nil
	}
	info, err := s.Info(name)
	if err != nil {
		return Template{}, err
	}
	return s.template(info), nil
}

// Version returns one version of a template, current or not, as a sandbox
// made from it needs it again (to resume). The host template has one.
func (s *Store) Version(name, version string) (Template, error) {
	if name == HostName {
		return s.host, nil
	}
	info, err := s.versionInfo(name, version)
	if err != nil {
		return Template{}, err
	}
	return s.template(info), nil
}

// versionInfo reads what one version of a template is.
func (s *Store) versionInfo(name, version string) (Info, error) {
	if !validName().MatchString(name) || !validVersion(version) {
		return Info{}, errdefs.NotFound("template %s version %q not found", name, version)
	}
	// #nosec G304 -- a file of the store, under a validated name and version
	b, err := os.ReadFile(filepath.Join(s.dir, name, version, "template.json"))
	if err != nil {
		return Info{}, errdefs.NotFound("template %s version %s is gone: %v", name, version, err)
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("read template.json: %w", err)
	}
	return info, nil
}

// validVersion is a version's form: digits, T and Z (20261122T071729280Z).
func validVersion(v string) bool {
	for _, c := range v {
		if (c < '0' || c > '9') && c != 'T' && c != 'Z' {
			return false
		}
	}
	return v != ""
}

// Info returns what the store knows of a template's current version.
func (s *Store) Info(name string) (Info, error) {
	if name == HostName {
		return s.info, nil
	}
	if validName().MatchString(name) {
		info, err := s.current(name)
		if err == nil {
			return info, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return Info{}, fmt.Errorf("template %s: %w", name, err)
		}
	}
	if b, ok := s.underWay(name); ok {
		return Info{}, errdefs.Unavailable("template %s is being built: %s; hutch template ls shows its progress", name, b.Describe(time.Now()))
	}
	// Only the shared templates are named: a workspace's own are its
	// business (see internal/trust/workspace), and its name may be another's.
	var shared []string
	for _, n := range s.names() {
		if !strings.Contains(n, "~") {
			shared = append(shared, n)
		}
	}
	return Info{}, errdefs.NotFound("template %q not found (hutch template ls lists yours); shared ones: %s", name, strings.Join(shared, ", "))
}

// List returns every template's current version, by name.
func (s *Store) List() ([]Info, error) {
	out := []Info{s.info}
	for _, name := range s.names() {
		if name == HostName {
			continue
		}
		info, err := s.current(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		out = append(out, info)
	}
	return out, nil
}

// Remove deletes a template, every version of it. The caller makes sure no
// sandbox uses it.
func (s *Store) Remove(name string) error {
	if name == HostName {
		return errdefs.InvalidArgument("the host template is built in and cannot be removed")
	}
	if _, err := s.Get(name); err != nil {
		return err
	}
	s.mu.Lock()
	_, busy := s.building[name]
	s.mu.Unlock()
	if busy {
		return errdefs.Conflict("template %s is being built; remove it when the build has ended", name)
	}
	// Renamed out of the way first, so that a crash half-way through the
	// removal leaves a build leftover, removed at the next Open, and never
	// a half template under the name.
	gone, err := os.MkdirTemp(s.dir, ".build-")
	if err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(s.dir, name), filepath.Join(gone, name)); err != nil {
		_ = os.Remove(gone) // empty
		return fmt.Errorf("remove template %s: %w", name, err)
	}
	// Gone from its name now, even if its files are not yet.
	defer s.changed(name)
	return removeBuild(gone)
}

// names lists the names in the store, host included, sorted.
func (s *Store) names() []string {
	names := []string{HostName}
	entries, _ := os.ReadDir(s.dir) // an unreadable store lists only host
	for _, e := range entries {
		if e.IsDir() && validName().MatchString(e.Name()) && e.Name() != HostName {
			if _, err := os.Lstat(filepath.Join(s.dir, e.Name(), "current")); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names[1:])
	return names
}

// current reads the info of name's current version.
func (s *Store) current(name string) (Info, error) {
	version, err := os.Readlink(filepath.Join(s.dir, name, "current"))
	if err != nil {
		return Info{}, err
	}
	// #nosec G304 -- a file of the store, under a validated name
	b, err := os.ReadFile(filepath.Join(s.dir, name, version, "template.json"))
	if err != nil {
		return Info{}, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("read template.json: %w", err)
	}
	return info, nil
}

func (s *Store) template(info Info) Template {
	dir := filepath.Join(s.dir, info.Name, info.Version)
	t := Template{Name: info.Name, Version: info.Version, RootDir: filepath.Join(dir, "rootfs"), Env: info.Env}
	if info.MemoryRuntime != "" {
		t.Memory, t.MemoryRuntime = filepath.Join(dir, "memory"), info.MemoryRuntime
	}
	switch {
	case info.onHost() && info.Skeleton == "":
		t.Binds = s.oldSnapshotBinds // its root has mount points for /etc's binds
	case info.onHost():
		t.Binds = s.host.Binds
	}
	return t
}

// Build is a template being built: a root directory beside the store that
// becomes a template by Commit, or disappears by Abort.
type Build struct {
	s     *Store
	name  string
	dir   string
	began time.Time
	done  bool
}

// Begin starts a build of a new version of name. Only one build of a name
// runs at a time. The caller must Commit or Abort it.
func (s *Store) Begin(name string) (*Build, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.building[name]; busy {
		return nil, errdefs.Conflict("template %s is already being built", name)
	}
	dir, err := os.MkdirTemp(s.dir, ".build-")
	if err != nil {
		return nil, fmt.Errorf("start template build: %w", err)
	}
	// #nosec G302 -- sandbox users must traverse template roots
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.Remove(dir) // empty
		return nil, err
	}
	began := time.Now()
	s.building[name] = &BuildUnderWay{Name: name, Began: began, Expected: s.lastBuildTook(name)}
	return &Build{s: s, name: name, dir: dir, began: began}, nil
}

// Root is where the build puts the template's root directory.
func (b *Build) Root() string { return filepath.Join(b.dir, "rootfs") }

// Commit makes the build the current version of its template. info's Name,
// Version, Created and SizeBytes are filled in.
func (b *Build) Commit(info Info) (Info, error) {
	if b.done {
		return Info{}, errors.New("template build already ended")
	}
	// Whatever the build mounted must be gone before the root is final.
	if points, err := mountinfo.Under(b.dir); err != nil || len(points) > 0 {
		return Info{}, errors.Join(err, fmt.Errorf("template %s: still mounted in the build: %v", b.name, points))
	}
	info.Created, info.Version = newVersion(filepath.Join(b.s.dir, b.name), time.Now().UTC())
	info.BuildSeconds = time.Since(b.began).Seconds()
	return b.commitAs(info)
}

// commitAs is Commit under info's own Version and Created: a version
// received from another node (Receive) keeps them.
func (b *Build) commitAs(info Info) (Info, error) {
	if b.done {
		return Info{}, errors.New("template build already ended")
	}
	nameDir := filepath.Join(b.s.dir, b.name)
	info.Name = b.name
	size, err := DiskUsage(b.Root())
	if err != nil {
		return Info{}, fmt.Errorf("size of template %s: %w", b.name, err)
	}
	if _, err := os.Stat(b.memory()); err == nil { // a snapshot's memory image
		mem, err := DiskUsage(b.memory())
		if err != nil {
			return Info{}, fmt.Errorf("size of template %s: %w", b.name, err)
		}
		size += mem
	}
	info.SizeBytes = size
	// On disk before it is current: steps write without syncing each file
	// (dpkg's unsafe I/O), the commit syncs them all at once.
	if err := syncFS(b.dir); err != nil {
		return Info{}, fmt.Errorf("sync template %s: %w", b.name, err)
	}
	js, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return Info{}, err
	}
	// #nosec G306 -- what `template ls` shows, no secret
	if err := os.WriteFile(filepath.Join(b.dir, "template.json"), append(js, '\n'), 0o644); err != nil {
		return Info{}, err
	}
	// #nosec G301 -- sandbox users must traverse template roots
	if err := os.MkdirAll(nameDir, 0o755); err != nil {
		return Info{}, err
	}
	if err := os.Rename(b.dir, filepath.Join(nameDir, info.Version)); err != nil {
		return Info{}, fmt.Errorf("commit template %s: %w", b.name, err)
	}
	b.end()
	// current is swapped by renaming a new symlink over it.
	link := filepath.Join(nameDir, ".current-"+info.Version)
	if err := os.Symlink(info.Version, link); err != nil {
		return Info{}, fmt.Errorf("commit template %s: %w", b.name, err)
	}
	if err := os.Rename(link, filepath.Join(nameDir, "current")); err != nil {
		_ = os.Remove(link) // the error is what matters
		return Info{}, fmt.Errorf("commit template %s: %w", b.name, err)
	}
	b.s.changed(b.name)
	return info, nil
}

// newVersion names a version after the time of its commit: sortable, and
// a valid file name (20261122T071729280Z). Two builds can end in the same
// millisecond, so a name already taken moves the time on by one. (Any
// other error is for the rename to report.)
func newVersion(nameDir string, now time.Time) (time.Time, string) {
	for {
		version := strings.Replace(now.Format("20060102T150405.000Z"), ".", "", 1)
		if _, err := os.Lstat(filepath.Join(nameDir, version)); err != nil {
			return now, version
		}
		now = now.Add(time.Millisecond)
	}
}

// fail is a build's deferred end: a failed build (err not nil) is put down to
// a full disk when it was one, which shows in many ways (a dpkg error, a
// failed copy) and is told once, before the build's files go; then Abort.
// After Commit it returns err as is.
func (b *Build) fail(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && outOfSpace(err, b.dir) {
		err = errdefs.ResourceExhausted("template %s: the daemon's disk is full (%s): %v", b.name, b.dir, err)
	}
	return errors.Join(err, b.Abort())
}

// Abort removes what the build made. Aborting an ended build does nothing,
// so `defer b.Abort()` is safe after Commit.
func (b *Build) Abort() error {
	if b.done {
		return nil
	}
	b.end()
	return removeBuild(b.dir)
}

func (b *Build) end() {
	b.done = true
	b.s.mu.Lock()
	delete(b.s.building, b.name)
	b.s.mu.Unlock()
}

// Prune removes the versions of built templates that are not current and
// that no sandbox uses (inUse says which are used). A version a sandbox
// still uses stays, and goes at a later Prune.
func (s *Store) Prune(inUse func(name, version string) bool) error {
	var errs []error
	for _, name := range s.names() {
		if name == HostName {
			continue
		}
		current, err := os.Readlink(filepath.Join(s.dir, name, "current"))
		if err != nil {
			continue // removed meanwhile
		}
		entries, err := os.ReadDir(filepath.Join(s.dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if e.IsDir() && e.Name() != current && !inUse(name, e.Name()) {
				errs = append(errs, removeBuild(filepath.Join(s.dir, name, e.Name())))
			}
		}
	}
	return errors.Join(errs...)
}

// removeBuild removes a build directory, first unmounting what a tool left
// mounted in it (debootstrap mounts /proc and /sys in its target), so that
// the removal never walks into a mount.
func removeBuild(dir string) error {
	if err := mountinfo.UnmountUnder(dir); err != nil {
		return err
	}
	if points, err := mountinfo.Under(dir); err != nil || len(points) > 0 {
		return errors.Join(err, fmt.Errorf("still mounted under %s: %v", dir, points))
	}
	return os.RemoveAll(dir)
}

// DiskUsage adds up the blocks of the files under root, each inode once.
// It follows no symbolic link: root may be a build's, links planted.
func DiskUsage(root string) (int64, error) {
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := sysStat(fi); ok {
			if seen[st.ino] {
				return nil
			}
			seen[st.ino] = true
			total += st.blocks * 512
		}
		return nil
	})
	return total, err
}

// syncFS writes to disk what the file system of dir holds in memory.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

// BuildUnderWay is a build of a template under way: since when, how far
// it is, and how long the last build of its name took (0: none is known).
type BuildUnderWay struct {
	Name     string
	Began    time.Time
	Last     Progress
	Expected time.Duration
}

// Left is how long the build is likely still to take at now, from the
// last build of its name: 0 when that is unknown or already past.
func (b BuildUnderWay) Left(now time.Time) time.Duration {
	return max(b.Expected-now.Sub(b.Began), 0)
}

// Describe says how far the build is, for a person: "step download 120/340
// for 1m20s, about 2m10s left".
func (b BuildUnderWay) Describe(now time.Time) string {
	msg := "starting"
	if b.Last.Step != "" {
		msg = "step " + b.Last.Step
		if b.Last.Total > 0 {
			msg += fmt.Sprintf(" %d/%d", b.Last.Done, b.Last.Total)
		}
	}
	msg += " for " + now.Sub(b.Began).Round(time.Second).String()
	switch left := b.Left(now); {
	case left > 0:
		msg += ", about " + left.Round(time.Second).String() + " left"
	case b.Expected > 0:
		msg += ", longer than the last build of it (" + b.Expected.Round(time.Second).String() + ")"
	default:
		msg += " (no earlier build here to tell how long is left)"
	}
	return msg
}

// Report records how far the build of name under way is.
func (s *Store) Report(name string, p Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.building[name]; b != nil {
		b.Last = p
	}
}

// Builds lists the builds under way, by name.
func (s *Store) Builds() []BuildUnderWay {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]BuildUnderWay, 0, len(s.building))
	for _, b := range s.building {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b BuildUnderWay) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *Store) underWay(name string) (BuildUnderWay, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.building[name]
	if b == nil {
		return BuildUnderWay{}, false
	}
	return *b, true
}

// lastBuildTook is how long the current version of name took to build: 0
// when there is none, or it was not built here.
func (s *Store) lastBuildTook(name string) time.Duration {
	info, err := s.current(name)
	if err != nil {
		return 0
	}
	return time.Duration(info.BuildSeconds * float64(time.Second))
}
