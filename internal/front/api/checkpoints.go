package api

import (
	"net/http"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/core/checkpoints"
)

// Checkpoints: POST takes one, GET lists them, …/diff compares one with
// the files now (or, with ?path=, a file's unified diff), …/rollback
// brings the sandbox back to one.

func checkpointJSON(c checkpoints.Checkpoint) client.Checkpoint {
	return client.Checkpoint{ID: c.ID, Name: c.Name, Note: c.Note, CreatedAt: c.Created, Memory: c.Memory, SizeBytes: c.Size}
}

func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req client.CheckpointRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decode(r, &req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	c, err := s.checkpts.Create(r.Context(), r.PathValue("id"), checkpoints.Request{Name: req.Name, Memory: req.Memory})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, checkpointJSON(c))
}

func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	all, err := s.checkpts.List(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Checkpoints []client.Checkpoint `json:"checkpoints"`
	}{Checkpoints: []client.Checkpoint{}}
	for _, c := range all {
		out.Checkpoints = append(out.Checkpoints, checkpointJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) diffCheckpoint(w http.ResponseWriter, r *http.Request) {
	id, cp := r.PathValue("id"), r.PathValue("checkpoint")
	out := client.CheckpointDiff{Checkpoint: cp, Changes: []client.FileChange{}}
	if path := r.URL.Query().Get("path"); path != "" {
		unified, err := s.checkpts.FileDiff(r.Context(), id, cp, path)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		out.Path, out.Unified = path, unified
		writeJSON(w, http.StatusOK, out)
		return
	}
	changes, truncated, err := s.checkpts.Diff(r.Context(), id, cp)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	for _, c := range changes {
		out.Changes = append(out.Changes, client.FileChange(c))
	}
	out.Truncated = truncated
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) rollbackCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req client.RollbackRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decode(r, &req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	sb, err := s.checkpts.Rollback(r.Context(), r.PathValue("id"), r.PathValue("checkpoint"), req.Memory)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(callerOf(r.Context()), sb))
}

func (s *Server) deleteCheckpoint(w http.ResponseWriter, r *http.Request) {
	if err := s.checkpts.Delete(r.Context(), r.PathValue("id"), r.PathValue("checkpoint")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
