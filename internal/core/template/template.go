// Package template keeps the templates sandboxes are made from: built
// from Debian, a Hutchfile or an image, imported from an image archive, and
// snapshots of sandboxes (a fork is a snapshot and sandboxes made from
// it). A service beside the sandbox core, over the template store
// (internal/storage/rootfs): it reaches sandboxes through the core's Acquire and
// makes forks with the core's Create.
//
// What a new version of a template means for the core's warm pool and for
// old versions is the core's business: the template store tells it of
// every change (rootfs.Store.Observe), whoever made it.
package template

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/processes"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Store is what the service reads of sandboxes' records (which template
// versions they use, what a fork copies) and writes of a fork's background
// processes (store.Store has it).
type Store interface {
	ListSandboxes(ctx context.Context) ([]*store.Sandbox, error)
	GetSandbox(ctx context.Context, id string) (*store.Sandbox, error)
	ListProcesses(ctx context.Context, sandboxID string) ([]*store.Process, error)
	PutProcess(ctx context.Context, p *store.Process) error
}

// Config wires a Service.
type Config struct {
	// Core is the lifecycle core: snapshots reach sandboxes through it,
	// forks are made by it.
	Core      *core.Manager
	Store     Store
	Templates *rootfs.Store
	// BuildBackend runs template build steps: the daemon's BuildRuntime
	// backend, which must be a backend.Builder (see build.go). Nil when
	// the daemon has none; BuildUnusable says why it is unusable on this
	// host, when it is.
	BuildBackend  backend.Backend
	BuildUnusable string
	// PackageCache keeps the packages template builds download.
	PackageCache string
	// Withdraw, on a cluster's node, unpublishes a template from the other
	// nodes (see internal/cluster/templates.go). A delete withdraws it
	// before removing it here, so that no node, this one included, copies
	// it back in between.
	Withdraw func(ctx context.Context, name string) error
	// Quotas admit a workspace's build steps against its quota, as its
	// sandboxes are; nil: no workspace has a quota.
	Quotas *quota.Keeper
	// Processes start a fork's background processes that ran in its
	// source (and did not come with its memory); nil: none are.
	Processes *processes.Keeper
	// Observer hears of each build and fork once it has ended (the
	// daemon's metrics); nil: none does.
	Observer hook.Observer
	Logger   *slog.Logger
}

// Service lists, builds, imports, snapshots and removes templates.
type Service struct {
	core          *core.Manager
	store         Store
	templates     *rootfs.Store
	buildBackend  backend.Backend
	buildUnusable string
	packageCache  string
	withdraw      func(ctx context.Context, name string) error
	quotas        *quota.Keeper
	processes     *processes.Keeper
	observer      hook.Observer
	log           *slog.Logger
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{
		core: cfg.Core, store: cfg.Store, templates: cfg.Templates, buildBackend: cfg.BuildBackend,
		buildUnusable: cfg.BuildUnusable, packageCache: cfg.PackageCache, withdraw: cfg.Withdraw, quotas: cfg.Quotas, processes: cfg.Processes, observer: cfg.Observer, log: cfg.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Info is a template with the number of sandboxes made from it.
type Info struct {
	rootfs.Info
	Sandboxes int
}

// BuildRequest asks for a template built from Debian.
type BuildRequest struct {
	Name     string
	Packages []string
	// NpmPackages are installed with npm, in a sandbox of the template.
	NpmPackages []string
	Suite       string
	Mirror      string
	// Image, instead of all the above, pulls an OCI image from a registry.
	Image string
	// Hutchfile, instead of all the above, is a recipe layered on another
	// template; Context is a tar of the files its COPY lines take.
	Hutchfile string
	Context   []byte
	// Workspace is the workspace whose build it is: its Hutchfile's FROM
	// names that workspace's templates or shared ones (see Resolve);
	// Admin, when set, may name any workspace's.
	Workspace string
	Admin     bool
	// Fresh builds a Debian template from nothing: no base system or build
	// an earlier one kept is used.
	Fresh bool
}

// Resolve is the stored name of the template that workspace ws calls
// name: its own (NAME~WS) if it has one, else the shared one. Only the
// administrator (admin) may give a qualified name, naming any
// workspace's; from a workspace's key such a template is not found.
func (s *Service) Resolve(ws, name string, admin bool) (string, error) {
	switch {
	case workspace.Qualified(name) && admin:
		return name, nil
	case workspace.Qualified(name):
		return "", errdefs.NotFound("template %s not found", name)
	case ws == "":
		return name, nil
	}
	own := workspace.Qualify(name, ws)
	if _, err := s.templates.Info(own); err == nil || errors.Is(err, errdefs.ErrUnavailable) { // there, or being built
		return own, nil
	}
	return name, nil
}

// List lists the templates, the host template first.
func (s *Service) List(ctx context.Context) ([]Info, error) {
	infos, err := s.templates.List()
	if err != nil {
		return nil, err
	}
	users, err := s.users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(infos))
	for _, i := range infos {
		out = append(out, Info{Info: i, Sandboxes: len(users[i.Name])})
	}
	return out, nil
}

// Get returns one template.
func (s *Service) Get(ctx context.Context, name string) (Info, error) {
	info, err := s.templates.Info(name)
	if err != nil {
		return Info{}, err
	}
	users, err := s.users(ctx)
	if err != nil {
		return Info{}, err
	}
	return Info{Info: info, Sandboxes: len(users[name])}, nil
}

// Delete removes a template no sandbox uses. A sandbox deleted a moment
// ago uses it until its teardown ends: that is waited for.
func (s *Service) Delete(ctx context.Context, name string) error {
	users, err := s.users(ctx)
	if err != nil {
		return err
	}
	if ids := users[name]; len(ids) > 0 {
		for _, id := range ids {
			if err := s.core.AwaitTeardown(ctx, id); err != nil {
				return err
			}
		}
		if users, err = s.users(ctx); err != nil {
			return err
		}
	}
	if ids := users[name]; len(ids) > 0 {
		slices.Sort(ids)
		return errdefs.Conflict("template %s is used by %d sandbox(es): %s; delete them first", name, len(ids), strings.Join(ids, ", "))
	}
	if s.withdraw != nil {
		if _, err := s.templates.Info(name); err != nil {
			return err
		}
		if err := s.withdraw(ctx, name); err != nil {
			return fmt.Errorf("withdraw template %s from the other nodes: %w", name, err)
		}
	}
	// Once withdrawn, this node's own look at the store may remove it
	// first: gone is what was asked.
	if err := s.templates.Remove(name); err != nil && (s.withdraw == nil || !errors.Is(err, errdefs.ErrNotFound)) {
		return err
	}
	s.log.Info("template deleted", "template", name)
	return nil
}

// Build builds a template from Debian and makes it the current version of
// its name. progress hears each step. A request with no packages for a
// default template's name (base, python, browser, agent) builds its recipe.
func (s *Service) Build(ctx context.Context, req BuildRequest, progress func(rootfs.Progress)) (Info, error) {
	progress = s.reporting(req.Name, progress)
	if req.Hutchfile != "" {
		if len(req.Packages) > 0 || len(req.NpmPackages) > 0 || req.Image != "" || req.Suite != "" || req.Mirror != "" {
			return Info{}, errdefs.InvalidArgument("hutchfile goes alone: its FROM says what the template is built on")
		}
		hf, err := rootfs.ParseHutchfile(req.Hutchfile)
		if err != nil {
			return Info{}, err
		}
		if hf.From, err = s.Resolve(req.Workspace, hf.From, req.Admin); err != nil {
			return Info{}, err
		}
		if len(req.Context) > rootfs.MaxContext {
			return Info{}, errdefs.InvalidArgument("the build context is %d MiB, over %d MiB", len(req.Context)>>20, rootfs.MaxContext>>20)
		}
		limits, err := s.limitsOf(ctx, req.Name, req.Workspace, req.Admin)
		if err != nil {
			return Info{}, err
		}
		return s.made(req.Name, "build", func() (rootfs.Info, error) {
			return s.templates.BuildHutchfile(ctx, req.Name, hf, req.Context, s.runner(limits), progress)
		})
	}
	limits, err := s.limitsOf(ctx, req.Name, req.Workspace, req.Admin)
	if err != nil {
		return Info{}, err
	}
	if req.Image != "" {
		if len(req.Packages) > 0 || len(req.NpmPackages) > 0 || req.Suite != "" || req.Mirror != "" {
			return Info{}, errdefs.InvalidArgument("image goes alone: a template comes from an image or from Debian packages, not both")
		}
		pull := s.templates.PullPublicImage
		if req.Admin {
			pull = s.templates.PullImage
		}
		return s.made(req.Name, "pull", func() (rootfs.Info, error) {
			return pull(ctx, req.Name, req.Image, limits.maxBytes, progress)
		})
	}
	if err := checkDebianSource(req); err != nil {
		return Info{}, err
	}
	// The administrator's builds of a default recipe are kept, and made
	// from what an earlier one kept when nothing they are made from has
	// changed (see internal/storage/rootfs/keptbuild.go).
	keep := false
	if r, ok := rootfs.RecipeFor(req.Name); ok && len(req.Packages) == 0 && len(req.NpmPackages) == 0 {
		req.Packages, req.NpmPackages = r.Packages, r.NpmPackages
		keep = req.Admin
	}
	s.log.Info("template build started", "template", req.Name, "packages", req.Packages, "npm_packages", req.NpmPackages)
	return s.made(req.Name, "build", func() (rootfs.Info, error) {
		return s.templates.BuildDebian(ctx, req.Name, rootfs.DebianOptions{
			Suite: req.Suite, Mirror: req.Mirror, Packages: req.Packages, CacheDir: s.packageCache,
			NpmPackages: req.NpmPackages, Keep: keep, Fresh: req.Fresh, Run: s.runner(limits),
		}, progress)
	})
}

// reporting is progress that the template store also hears, so that a
// create of the template meanwhile, the health route and template ls can
// tell how far its build is (rootfs.Store.Builds).
func (s *Service) reporting(name string, progress func(rootfs.Progress)) func(rootfs.Progress) {
	return func(p rootfs.Progress) {
		s.templates.Report(name, p)
		if progress != nil {
			progress(p)
		}
	}
}

// Builds lists the template builds under way.
func (s *Service) Builds() []rootfs.BuildUnderWay { return s.templates.Builds() }

// checkDebianSource refuses a workspace's key a suite or a mirror of its
// own: the host's release from the host's mirror is what a workspace
// builds. Another suite's keyring may be missing or weaker, and a mirror
// is a server the daemon fetches from as root, on whatever network it is
// (see internal/storage/rootfs/debootstrap.go); both are the administrator's to
// choose.
func checkDebianSource(req BuildRequest) error {
	if req.Admin {
		return nil
	}
	suite, mirror := rootfs.HostDebian()
	if req.Suite != "" && req.Suite != suite {
		return errdefs.PermissionDenied("suite %s: a workspace's key builds from the host's release, %s; leave suite out, or have the daemon's own key (api.key) build the template", req.Suite, suite)
	}
	if req.Mirror != "" && req.Mirror != mirror {
		return errdefs.PermissionDenied("mirror %s: a workspace's key builds from the host's mirror, %s; leave mirror out, or have the daemon's own key (api.key) build the template", req.Mirror, mirror)
	}
	return nil
}

// Import makes a template from an image archive (docker-archive or OCI
// layout tar) read from r. name is the stored name: a workspace's
// (NAME~WS) is bounded by that workspace's disk quota (see limits.go), a
// shared one is the administrator's.
func (s *Service) Import(ctx context.Context, name string, r io.Reader, progress func(rootfs.Progress)) (Info, error) {
	progress = s.reporting(name, progress)
	if err := rootfs.CheckName(name); err != nil {
		return Info{}, err
	}
	limits, err := s.limitsOf(ctx, name, "", true)
	if err != nil {
		return Info{}, err
	}
	return s.made(name, "import", func() (rootfs.Info, error) {
		path, cleanup, err := s.templates.Upload(r, limits.maxBytes)
		if err != nil {
			return rootfs.Info{}, err
		}
		defer cleanup()
		return s.templates.ImportArchive(ctx, name, path, limits.maxBytes, progress)
	})
}

// made runs what makes a new version of template name and logs how it
// went. (Its commit has told the core, which replaces the pool's sandboxes
// and old versions no sandbox uses.)
func (s *Service) made(name, how string, build func() (rootfs.Info, error)) (Info, error) {
	log := s.log.With("template", name)
	began := time.Now()
	info, err := build()
	if how != "import" {
		s.observed(hook.Step{Name: "build", Runtime: BuildRuntime, Took: time.Since(began), Err: err})
	}
	if err != nil {
		log.Warn("template "+how+" failed", "error", err)
		return Info{}, err
	}
	log.Info("template made", "how", how, "version", info.Version, "size_bytes", info.SizeBytes)
	return Info{Info: info}, nil
}

// observed tells the Observer, if there is one, of step.
func (s *Service) observed(step hook.Step) {
	if s.observer != nil {
		s.observer.Observed(step)
	}
}

// users maps template names to the sandboxes made from them.
func (s *Service) users(ctx context.Context) (map[string][]string, error) {
	list, err := s.store.ListSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	users := map[string][]string{}
	for _, sb := range list {
		users[sb.Template] = append(users[sb.Template], sb.ID)
	}
	return users, nil
}

// Archive writes a version of template name as an archive to w (see
// rootfs.Store.WriteArchive).
func (s *Service) Archive(ctx context.Context, w io.Writer, name, version string) (string, error) {
	return s.templates.WriteArchive(ctx, w, name, version)
}
