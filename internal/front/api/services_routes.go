package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/front/screenshot"
)

// Services (internal/core/exec/services.go): background processes with a port,
// with a status a preview pane shows.

// serviceJSON is a service of sandbox id, with its preview's URLs.
func (s *Server) serviceJSON(id string, svc exec.ServiceInfo) client.Service {
	out := client.Service{
		Process: processJSON(svc.ProcessInfo), Public: svc.Public, Slot: svc.Slot,
		Since: svc.Since, ExitCode: svc.ExitCode, LogTail: svc.LogTail,
	}
	if s.previews != nil {
		urls := s.previewURLs(id, svc.Port)
		out.PreviewURL, out.PathURL = urls.host, urls.path
	}
	return out
}

func (s *Server) startService(w http.ResponseWriter, r *http.Request) {
	var req client.StartServiceRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	svc, err := s.execs.StartService(r.Context(), r.PathValue("id"), exec.ServiceRequest{
		ProcessRequest: exec.ProcessRequest{
			Name: req.Name, Cmd: req.Cmd, Command: req.Command, Cwd: req.Cwd, Env: req.Env, User: req.User,
			Port: req.Port, ForUser: callerOf(r.Context()).user,
		},
		Public: req.Public, Slot: req.Slot, Replace: req.Replace,
	})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.serviceJSON(r.PathValue("id"), svc))
}

func (s *Server) listServices(w http.ResponseWriter, r *http.Request) {
	all, err := s.execs.Services(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Services []client.Service `json:"services"`
	}{Services: []client.Service{}}
	for _, svc := range all {
		out.Services = append(out.Services, s.serviceJSON(r.PathValue("id"), svc))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getService(w http.ResponseWriter, r *http.Request) {
	s.answerService(w, r, s.execs.Service)
}

func (s *Server) restartService(w http.ResponseWriter, r *http.Request) {
	s.answerService(w, r, s.execs.RestartService)
}

func (s *Server) stopService(w http.ResponseWriter, r *http.Request) {
	s.answerService(w, r, s.execs.StopService)
}

// answerService answers with what do returns of the service the path
// names.
func (s *Server) answerService(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, id, name string) (exec.ServiceInfo, error)) {
	svc, err := do(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, s.serviceJSON(r.PathValue("id"), svc))
}

func (s *Server) deleteService(w http.ResponseWriter, r *http.Request) {
	if err := s.execs.DeleteService(r.Context(), r.PathValue("id"), r.PathValue("name")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serviceEvents streams a service's status as server-sent "status"
// events: as it is, then at each change, until the client leaves.
func (s *Server) serviceEvents(w http.ResponseWriter, r *http.Request) {
	sse := &sseWriter{w: w}
	err := s.execs.ServiceEvents(r.Context(), r.PathValue("id"), r.PathValue("name"), func(svc exec.ServiceInfo) error {
		return sse.event("status", s.serviceJSON(r.PathValue("id"), svc))
	})
	if err != nil {
		s.endStream(w, r, sse, err, "", nil)
	}
}

// Screenshots takes screenshots of what sandboxes serve
// (internal/front/screenshot).
type Screenshots interface {
	Shoot(ctx context.Context, shot screenshot.Shot) ([]byte, error)
}

// serviceScreenshot answers with a PNG of a service's page.
func (s *Server) serviceScreenshot(w http.ResponseWriter, r *http.Request) {
	var req client.ScreenshotRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if s.shots == nil {
		writeError(w, r, s.log, errdefs.NotImplemented("screenshots are off in this daemon"))
		return
	}
	id := r.PathValue("id")
	svc, err := s.execs.Service(r.Context(), id, r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	shot := screenshot.Shot{Sandbox: id, Port: svc.Port, Path: req.Path, Width: req.Width, Height: req.Height, FullPage: req.FullPage}
	if c := req.Clip; c != nil {
		shot.Clip = &screenshot.Clip{X: c.X, Y: c.Y, W: c.W, H: c.H}
	}
	png, err := s.shots.Shoot(r.Context(), shot)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(len(png)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(png)
}
