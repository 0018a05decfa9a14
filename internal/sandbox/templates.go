package sandbox

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/template"
)

// TemplateInfo is a template with the number of sandboxes made from it.
type TemplateInfo struct {
	template.Info
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
}

// Templates lists the templates, the host template first.
func (m *Manager) Templates(ctx context.Context) ([]TemplateInfo, error) {
	infos, err := m.templates.List()
	if err != nil {
		return nil, err
	}
	users, err := m.templateUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TemplateInfo, 0, len(infos))
	for _, i := range infos {
		out = append(out, TemplateInfo{Info: i, Sandboxes: len(users[i.Name])})
	}
	return out, nil
}

// Template returns one template.
func (m *Manager) Template(ctx context.Context, name string) (TemplateInfo, error) {
	info, err := m.templates.Info(name)
	if err != nil {
		return TemplateInfo{}, err
	}
	users, err := m.templateUsers(ctx)
	if err != nil {
		return TemplateInfo{}, err
	}
	return TemplateInfo{Info: info, Sandboxes: len(users[name])}, nil
}

// DeleteTemplate removes a template no sandbox uses.
func (m *Manager) DeleteTemplate(ctx context.Context, name string) error {
	users, err := m.templateUsers(ctx)
	if err != nil {
		return err
	}
	if ids := users[name]; len(ids) > 0 {
		slices.Sort(ids)
		return errdefs.Conflict("template %s is used by %d sandbox(es): %s; delete them first", name, len(ids), strings.Join(ids, ", "))
	}
	if err := m.templates.Remove(name); err != nil {
		return err
	}
	m.flushPool(name)
	m.log.Info("template deleted", "template", name)
	return nil
}

// BuildTemplate builds a template from Debian and makes it the current
// version of its name. progress hears each step. A request with no
// packages for a default template's name (base, python) builds its recipe.
func (m *Manager) BuildTemplate(ctx context.Context, req BuildRequest, progress func(template.Progress)) (TemplateInfo, error) {
	if req.Hutchfile != "" {
		if len(req.Packages) > 0 || len(req.NpmPackages) > 0 || req.Image != "" || req.Suite != "" || req.Mirror != "" {
			return TemplateInfo{}, errdefs.InvalidArgument("hutchfile goes alone: its FROM says what the template is built on")
		}
		hf, err := template.ParseHutchfile(req.Hutchfile)
		if err != nil {
			return TemplateInfo{}, err
		}
		if len(req.Context) > template.MaxContext {
			return TemplateInfo{}, errdefs.InvalidArgument("the build context is %d MiB, over %d MiB", len(req.Context)>>20, template.MaxContext>>20)
		}
		return m.made(ctx, req.Name, "build", func() (template.Info, error) {
			return m.templates.BuildHutchfile(ctx, req.Name, hf, req.Context, m.runBuildStep, progress)
		})
	}
	if req.Image != "" {
		if len(req.Packages) > 0 || len(req.NpmPackages) > 0 || req.Suite != "" || req.Mirror != "" {
			return TemplateInfo{}, errdefs.InvalidArgument("image goes alone: a template comes from an image or from Debian packages, not both")
		}
		return m.made(ctx, req.Name, "pull", func() (template.Info, error) {
			return m.templates.PullImage(ctx, req.Name, req.Image, progress)
		})
	}
	if r, ok := template.RecipeFor(req.Name); ok && len(req.Packages) == 0 && len(req.NpmPackages) == 0 {
		req.Packages, req.NpmPackages = r.Packages, r.NpmPackages
	}
	m.log.Info("template build started", "template", req.Name, "packages", req.Packages, "npm_packages", req.NpmPackages)
	return m.made(ctx, req.Name, "build", func() (template.Info, error) {
		return m.templates.BuildDebian(ctx, req.Name, template.DebianOptions{
			Suite: req.Suite, Mirror: req.Mirror, Packages: req.Packages, CacheDir: m.packageCache,
			NpmPackages: req.NpmPackages, Run: m.runBuildStep,
		}, progress)
	})
}

// ImportTemplate makes a template from an image archive (docker-archive
// or OCI layout tar) read from r.
func (m *Manager) ImportTemplate(ctx context.Context, name string, r io.Reader, progress func(template.Progress)) (TemplateInfo, error) {
	if err := template.CheckName(name); err != nil {
		return TemplateInfo{}, err
	}
	return m.made(ctx, name, "import", func() (template.Info, error) {
		path, cleanup, err := m.templates.Upload(r)
		if err != nil {
			return template.Info{}, err
		}
		defer cleanup()
		return m.templates.ImportArchive(ctx, name, path, progress)
	})
}

// made runs what makes a new version of template name, logs how it went,
// and replaces the pool's sandboxes and old versions no sandbox uses.
func (m *Manager) made(ctx context.Context, name, how string, build func() (template.Info, error)) (TemplateInfo, error) {
	log := m.log.With("template", name)
	info, err := build()
	if err != nil {
		log.Warn("template "+how+" failed", "error", err)
		return TemplateInfo{}, err
	}
	log.Info("template made", "how", how, "version", info.Version, "size_bytes", info.SizeBytes)
	m.flushPool(name) // the old version's pool sandboxes go, new ones come
	if err := m.pruneTemplates(ctx); err != nil {
		log.Warn("prune old template versions", "error", err)
	}
	return TemplateInfo{Info: info}, nil
}

// pruneTemplates removes old template versions no sandbox uses.
func (m *Manager) pruneTemplates(ctx context.Context) error {
	list, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	used := m.poolVersions()
	for _, sb := range list {
		used[sb.Template+"/"+sb.TemplateVersion] = true
	}
	return m.templates.Prune(func(name, version string) bool { return used[name+"/"+version] })
}

// templateUsers maps template names to the sandboxes made from them.
func (m *Manager) templateUsers(ctx context.Context) (map[string][]string, error) {
	list, err := m.store.ListSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	users := map[string][]string{}
	for _, sb := range list {
		users[sb.Template] = append(users[sb.Template], sb.ID)
	}
	return users, nil
}
