package api

import (
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/exec"
)

func processJSON(p exec.ProcessInfo) client.Process {
	return client.Process{
		Name: p.Name, Cmd: p.Argv, Cwd: p.Cwd, User: p.User, EnvNames: p.EnvNames,
		Port: p.Port, Status: p.Status, Pid: p.Pid, CreatedAt: p.CreatedAt,
	}
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) {
	var req client.StartProcessRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p, err := s.execs.StartProcess(r.Context(), r.PathValue("id"), exec.ProcessRequest{
		Name: req.Name, Cmd: req.Cmd, Command: req.Command, Cwd: req.Cwd, Env: req.Env, User: req.User, Port: req.Port,
		ForUser: callerOf(r.Context()).user, Stdin: req.Stdin,
	})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, processJSON(p))
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	procs, err := s.execs.ListProcesses(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Processes []client.Process `json:"processes"`
	}{Processes: []client.Process{}}
	for _, p := range procs {
		out.Processes = append(out.Processes, processJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// processLogs answers with a process's kept output: server-sent events
// (stdout, stderr, then end) when the client accepts them, which follow
// the process with ?follow=true; else one JSON object.
func (s *Server) processLogs(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	follow, err := boolQuery(r, "follow", false)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if !acceptsEvents(r) {
		if follow {
			writeError(w, r, s.log, errdefs.InvalidArgument("follow needs Accept: text/event-stream"))
			return
		}
		var stdout, stderr capped
		if err := s.execs.ProcessLogs(r.Context(), id, name, false, collect(&stdout, &stderr)); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		writeJSON(w, http.StatusOK, client.ProcessLogs{Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.truncated || stderr.truncated})
		return
	}
	sse := &sseWriter{w: w}
	text := s.outputEvents(sse)
	err = s.execs.ProcessLogs(r.Context(), id, name, follow, text.send)
	if err == nil {
		err = text.flush()
	}
	s.endStream(w, r, sse, err, "end", struct{}{})
}

func (s *Server) signalProcess(w http.ResponseWriter, r *http.Request) {
	var req client.SignalRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.execs.SignalProcess(r.Context(), r.PathValue("id"), r.PathValue("name"), req.Signal); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// processInput writes to a background process's stdin (data as text, or
// data_base64), then with close ends it.
func (s *Server) processInput(w http.ResponseWriter, r *http.Request) {
	var req client.ProcessInputRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	data := []byte(req.Data)
	if req.DataBase64 != nil {
		if req.Data != "" {
			writeError(w, r, s.log, errdefs.InvalidArgument("give data or data_base64, not both"))
			return
		}
		data = req.DataBase64
	}
	if len(data) == 0 && !req.Close {
		writeError(w, r, s.log, errdefs.InvalidArgument("give data to write, or close"))
		return
	}
	if err := s.execs.ProcessInput(r.Context(), r.PathValue("id"), r.PathValue("name"), data, req.Close); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) restartProcess(w http.ResponseWriter, r *http.Request) {
	p, err := s.execs.RestartProcess(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, processJSON(p))
}

func (s *Server) deleteProcess(w http.ResponseWriter, r *http.Request) {
	if err := s.execs.DeleteProcess(r.Context(), r.PathValue("id"), r.PathValue("name")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) sandboxActivity(w http.ResponseWriter, r *http.Request) {
	a, err := s.m.Activity(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := client.Activity{
		State: string(a.State), Busy: a.Busy, Reasons: a.Reasons, LastActivityAt: a.LastActivity.UTC(),
		IdleTimeoutS: int64(a.IdleTimeout.Seconds()), IdleAction: a.IdleAction,
	}
	if !a.ActionAt.IsZero() {
		at := a.ActionAt.UTC()
		out.ActionAt = &at
	}
	writeJSON(w, http.StatusOK, out)
}
