package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/template"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// Templates: the shared ones (built in, or the administrator's) every
// caller sees and only the administrator changes; a workspace's own only
// it (and the administrator) sees. Names are kept as internal/trust/workspace
// says, and read plain.

// templateRef is the stored name of the template c calls name, which c
// may see.
func (s *Server) templateRef(ctx context.Context, c caller, name string) (string, error) {
	return s.templates.Resolve(c.workspace, name, c.admin)
}

// templateNew is the stored name of a template c makes: the
// administrator's are shared, a key's its workspace's.
func (s *Server) templateNew(ctx context.Context, c caller, name string) (string, error) {
	switch {
	case c.admin:
		return name, nil
	case workspace.Qualified(name):
		return "", errdefs.InvalidArgument("template name %q: '~' is not allowed", name)
	case name == "":
		return "", errdefs.InvalidArgument("name is required")
	}
	if _, err := s.templates.Get(ctx, name); err == nil {
		return "", errdefs.AlreadyExists("template %s is a shared one; give yours another name", name)
	}
	return workspace.Qualify(name, c.workspace), nil
}

// snapshotName is the stored name of the snapshot c calls name of sandbox
// id: its sandbox's workspace's own, whoever makes it, the administrator
// too. A snapshot holds the sandbox's files (and under gVisor its
// memory, its secrets with it): shared, it would show them to every
// workspace.
func (s *Server) snapshotName(ctx context.Context, c caller, id, name string) (string, error) {
	switch {
	case workspace.Qualified(name):
		return "", errdefs.InvalidArgument("snapshot name %q: '~' is not allowed", name)
	case name == "":
		return "", errdefs.InvalidArgument("name is required")
	case name == rootfs.HostName:
		return "", errdefs.InvalidArgument("a snapshot cannot be named %s", rootfs.HostName)
	}
	p, err := s.m.Locate(ctx, id)
	if err != nil {
		return "", err
	}
	if _, err := s.templates.Get(ctx, name); err == nil {
		return "", errdefs.AlreadyExists("template %s is a shared one; give the snapshot another name", name)
	}
	return workspace.Qualify(name, p.Workspace), nil
}

// templateOwned is the stored name of the template c names to change or
// remove: a shared one is only the administrator's to change.
func (s *Server) templateOwned(ctx context.Context, c caller, name string) (string, error) {
	stored, err := s.templateRef(ctx, c, name)
	if err != nil {
		return "", err
	}
	if _, ws := workspace.Split(stored); ws == "" && !c.admin {
		if _, err := s.templates.Get(ctx, stored); err != nil {
			return "", err
		}
		return "", errdefs.PermissionDenied("template %s is shared: only the daemon's own key changes it", name)
	}
	return stored, nil
}

func templateJSON(c caller, t template.Info) client.Template {
	parent, version, _ := strings.Cut(t.Parent, "@")
	if parent != "" {
		parent = c.shown(parent) + "@" + version
	}
	return client.Template{
		Name: c.shown(t.Name), Version: t.Version, Source: t.Source, Created: t.Created, Packages: t.Packages, NpmPackages: t.NpmPackages, Image: t.Image, Digest: t.Digest, Parent: parent, Steps: t.Steps, Env: t.Env,
		Sandbox: t.Sandbox, MemoryRuntime: t.MemoryRuntime, Suite: t.Suite, Mirror: t.Mirror, SizeBytes: t.SizeBytes, Sandboxes: t.Sandboxes,
	}
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	list, err := s.templates.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	ws := c.filter(r)
	out := struct {
		Templates []client.Template `json:"templates"`
	}{Templates: []client.Template{}}
	for _, t := range list {
		if _, owner := workspace.Split(t.Name); c.seesTemplate(t.Name) && (ws == "" || owner == "" || owner == ws) {
			out.Templates = append(out.Templates, templateJSON(c, t))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	name, err := s.templateRef(r.Context(), c, r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	t, err := s.templates.Get(r.Context(), name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, templateJSON(c, t))
}

// HeaderArchiveSum is the trailer of a template's archive: the SHA-256
// of what was sent, which the receiver checks what it read against.
const HeaderArchiveSum = "Hutch-Archive-Sha256"

// templateArchive sends a version of a template (?version=, else the
// current one) as an archive: how nodes copy templates to each other
// (internal/cluster). The administrator's only: it holds whole roots.
func (s *Server) templateArchive(w http.ResponseWriter, r *http.Request) {
	if err := ownerOnly(r, "copy a template's archive"); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	name, version := r.PathValue("name"), r.URL.Query().Get("version")
	if version == "" {
		t, err := s.templates.Get(r.Context(), name)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		version = t.Version
	}
	w.Header().Set("Trailer", HeaderArchiveSum)
	w.Header().Set("Content-Type", "application/x-tar")
	// An archive that fails half-way ends without its sum: the receiver
	// refuses it.
	sum, err := s.templates.Archive(r.Context(), w, name, version)
	if err != nil {
		s.log.Warn("send a template's archive", "template", name, "version", version, "error", err)
		return
	}
	w.Header().Set(HeaderArchiveSum, sum)
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	name, err := s.templateOwned(r.Context(), callerOf(r.Context()), r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.templates.Delete(r.Context(), name); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// buildTemplate builds a template. With Accept: text/event-stream it
// streams "progress" events, then "template" (or "error"); otherwise it
// answers the template when the build is done. The client going away
// stops the build.
func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) {
	var req client.BuildTemplateRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if req.Name == "" {
		writeError(w, r, s.log, errdefs.InvalidArgument("name is required"))
		return
	}
	c := callerOf(r.Context())
	name, err := s.templateNew(r.Context(), c, req.Name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	breq := template.BuildRequest{
		Name: name, Workspace: c.workspace, Admin: c.admin, Packages: req.Packages, NpmPackages: req.NpmPackages, Suite: req.Suite, Mirror: req.Mirror, Image: req.Image,
		Hutchfile: req.Hutchfile, Context: req.Context, Fresh: req.Fresh,
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		t, err := s.templates.Build(r.Context(), breq, nil)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		writeJSON(w, http.StatusCreated, templateJSON(c, t))
		return
	}
	sse := &sseWriter{w: w}
	t, err := s.templates.Build(r.Context(), breq, func(p rootfs.Progress) {
		// A client that cannot keep up stops the build through its
		// context; the error here adds nothing.
		_ = sse.event("progress", client.BuildProgress{Step: p.Step, Done: p.Done, Total: p.Total, Message: p.Message})
	})
	switch {
	case err != nil && !sse.started:
		writeError(w, r, s.log, err)
	case err != nil:
		_ = sse.event("error", errorBody{Error: describe(err)})
	default:
		_ = sse.event("template", templateJSON(c, t))
	}
}

// importTemplate makes a template from the image archive in the request
// body (a docker-archive or an OCI layout tar).
func (s *Server) importTemplate(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	name, err := s.templateNew(r.Context(), c, r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	t, err := s.templates.Import(r.Context(), name, r.Body, nil)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, templateJSON(c, t))
}
