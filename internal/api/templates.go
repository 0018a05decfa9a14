package api

import (
	"net/http"
	"strings"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/errdefs"
	"github.com/hutchdev/hutch/internal/template"
	"github.com/hutchdev/hutch/internal/templates"
)

func templateJSON(t templates.Info) client.Template {
	return client.Template{
		Name: t.Name, Version: t.Version, Source: t.Source, Created: t.Created, Packages: t.Packages, NpmPackages: t.NpmPackages, Image: t.Image, Digest: t.Digest, Parent: t.Parent, Steps: t.Steps, Env: t.Env,
		Sandbox: t.Sandbox, MemoryRuntime: t.MemoryRuntime, Suite: t.Suite, Mirror: t.Mirror, SizeBytes: t.SizeBytes, Sandboxes: t.Sandboxes,
	}
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	list, err := s.templates.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Templates []client.Template `json:"templates"`
	}{Templates: []client.Template{}}
	for _, t := range list {
		out.Templates = append(out.Templates, templateJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.templates.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, templateJSON(t))
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	if err := s.templates.Delete(r.Context(), r.PathValue("name")); err != nil {
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
	// A Hutchfile's context comes in the body, base64: 4/3 of its 64 MiB.
	if err := decodeLimit(r, &req, template.MaxContext*4/3+1<<20); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if req.Name == "" {
		writeError(w, r, s.log, errdefs.InvalidArgument("name is required"))
		return
	}
	breq := templates.BuildRequest{
		Name: req.Name, Packages: req.Packages, NpmPackages: req.NpmPackages, Suite: req.Suite, Mirror: req.Mirror, Image: req.Image,
		Hutchfile: req.Hutchfile, Context: req.Context,
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		t, err := s.templates.Build(r.Context(), breq, nil)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		writeJSON(w, http.StatusCreated, templateJSON(t))
		return
	}
	sse := &sseWriter{w: w}
	t, err := s.templates.Build(r.Context(), breq, func(p template.Progress) {
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
		_ = sse.event("template", templateJSON(t))
	}
}

// importTemplate makes a template from the image archive in the request
// body (a docker-archive or an OCI layout tar).
func (s *Server) importTemplate(w http.ResponseWriter, r *http.Request) {
	t, err := s.templates.Import(r.Context(), r.PathValue("name"), r.Body, nil)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, templateJSON(t))
}
