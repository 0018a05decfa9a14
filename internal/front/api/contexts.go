package api

import (
	"net/http"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/exec"
)

// Code contexts (internal/core/exec/contexts.go): created, listed, restarted
// and deleted here; code runs in one through POST …/code with a
// context_id (runInContext).

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	var req client.CreateContextRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if req.Language == "" {
		writeError(w, r, s.log, errdefs.InvalidArgument("language is required: python, javascript, typescript or bash"))
		return
	}
	c, err := s.execs.CreateContext(r.Context(), r.PathValue("id"), exec.ContextRequest{
		Language: req.Language, Cwd: req.Cwd, Env: req.Env, User: req.User, ForUser: callerOf(r.Context()).user,
	})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, contextJSON(c))
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	cs, err := s.execs.Contexts(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Contexts []client.CodeContext `json:"contexts"`
	}{Contexts: []client.CodeContext{}}
	for _, c := range cs {
		out.Contexts = append(out.Contexts, contextJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	c, err := s.execs.RestartContext(r.Context(), r.PathValue("id"), r.PathValue("context"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, contextJSON(c))
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	if err := s.execs.DeleteContext(r.Context(), r.PathValue("id"), r.PathValue("context")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func contextJSON(c exec.Context) client.CodeContext {
	return client.CodeContext{ID: c.ID, Language: c.Language, Cwd: c.Cwd, User: c.User}
}

// runInContext runs code in a context: server-sent events (stdout,
// stderr, result, error, then end) when the client accepts them, else one
// CodeExecution at the end.
func (s *Server) runInContext(w http.ResponseWriter, r *http.Request, req client.CodeRequest) {
	id := r.PathValue("id")
	run := exec.ContextCode{ContextID: req.ContextID, Code: req.Code, Timeout: time.Duration(req.TimeoutS) * time.Second, ListFiles: true}
	began := time.Now()
	if acceptsEvents(r) {
		sse := &sseWriter{w: w}
		text := s.outputEvents(sse)
		end, err := s.execs.RunInContext(r.Context(), id, run, func(ev exec.CodeEvent) error {
			switch {
			case ev.Result != nil:
				return sse.event("result", codeResult(ev.Result))
			case ev.Error != nil:
				return sse.event("error", codeError(ev.Error))
			case ev.Stderr != "":
				return text.send(exec.Stderr, []byte(ev.Stderr))
			default:
				return text.send(exec.Stdout, []byte(ev.Stdout))
			}
		})
		if err == nil {
			err = text.flush()
		}
		s.endStream(w, r, sse, err, "end", s.codeEnd(id, end, began))
		return
	}
	var stdout, stderr capped
	out := client.CodeExecution{Results: []client.CodeResult{}}
	end, err := s.execs.RunInContext(r.Context(), id, run, func(ev exec.CodeEvent) error {
		switch {
		case ev.Result != nil:
			out.Results = append(out.Results, codeResult(ev.Result))
		case ev.Error != nil:
			e := codeError(ev.Error)
			out.Error = &e
		default:
			stdout.Write([]byte(ev.Stdout))
			stderr.Write([]byte(ev.Stderr))
		}
		return nil
	})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out.Stdout, out.Stderr, out.Truncated = stdout.String(), stderr.String(), stdout.truncated || stderr.truncated
	out.CodeEnd = s.codeEnd(id, end, began)
	writeJSON(w, http.StatusOK, out)
}

// codeEnd is a call's end as the API tells it: the files it wrote with
// URLs to download them.
func (s *Server) codeEnd(id string, end exec.CodeEnd, began time.Time) client.CodeEnd {
	out := client.CodeEnd{
		ExecutionCount: end.ExecutionCount, TimedOut: end.TimedOut, Restarted: end.Restarted,
		FilesTruncated: end.FilesTruncated, DurationMS: time.Since(began).Milliseconds(),
	}
	for _, p := range end.Files {
		f := client.CodeFile{Path: p}
		if u, err := s.tools.DownloadURL(id, p); err == nil {
			f.DownloadURL = u
		} else {
			s.log.Warn("sign a download URL", "sandbox_id", id, "error", err)
		}
		out.Files = append(out.Files, f)
	}
	return out
}

func codeResult(r *exec.CodeResult) client.CodeResult {
	return client.CodeResult{IsMainResult: r.Main, Data: r.Data, Metadata: r.Metadata}
}

func codeError(e *exec.CodeError) client.CodeError {
	return client.CodeError{Name: e.Name, Value: e.Value, Traceback: e.Traceback}
}
