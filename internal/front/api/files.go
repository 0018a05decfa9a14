package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/files"
)

func entryJSON(e files.Entry) client.FileEntry {
	out := client.FileEntry{
		Name: e.Name, Path: e.Path, Size: e.Size,
		Mode:        fmt.Sprintf("%04o", e.Mode&0o7777),
		Permissions: e.Permissions, Owner: e.Owner, Group: e.Group,
		ModifiedAt: e.ModifiedAt, SymlinkTarget: e.SymlinkTarget,
	}
	switch e.Type {
	case files.TypeDir:
		out.Type = client.TypeDir
	case files.TypeSymlink:
		out.Type = client.TypeSymlink
	default:
		out.Type = client.TypeFile
	}
	return out
}

// boolQuery reads query parameter name, true or false; def when absent.
func boolQuery(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.InvalidArgument("%s must be true or false, got %q", name, v)
	}
	return b, nil
}

// pathQuery returns the path and user query parameters.
func pathQuery(r *http.Request) (path, user string) {
	q := r.URL.Query()
	return q.Get("path"), q.Get("user")
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	path, user := pathQuery(r)
	body, err := s.files.ReadFile(r.Context(), r.PathValue("id"), path, user)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if n, ok := body.(interface{ Size() int64 }); ok && n.Size() >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(n.Size(), 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil {
		// Headers are out: all that can be done is to cut the response,
		// which the client sees as a short body.
		s.log.Warn("read file cut short", "path", r.URL.Path, "error", err)
	}
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	path, user := pathQuery(r)
	e, err := s.files.WriteFile(r.Context(), r.PathValue("id"), path, user, r.Body)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, entryJSON(e))
}

// uploadFiles writes each file part of a multipart/form-data body into
// the workspace's user-uploads, by the part's file name. Parts that are not
// files are skipped. If one fails, the ones written before it are removed.
func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) {
	id, user := r.PathValue("id"), r.URL.Query().Get("user")
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, r, s.log, errdefs.InvalidArgument("an upload's body must be multipart/form-data, a part per file: %v", err))
		return
	}
	written := []client.FileEntry{}
	err = func() error {
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errdefs.Kind(err) != nil {
				return err // too large, or too slow
			}
			if err != nil {
				return errdefs.InvalidArgument("malformed multipart body: %v", err)
			}
			if part.FileName() == "" {
				continue // a form field, not a file
			}
			e, err := s.files.Upload(r.Context(), id, part.FileName(), user, part)
			if err != nil {
				return err
			}
			written = append(written, entryJSON(e))
		}
	}()
	if err != nil {
		for _, e := range written {
			if rerr := s.files.Remove(context.WithoutCancel(r.Context()), id, e.Path, user); rerr != nil {
				s.log.Warn("remove upload after a failed one", "sandbox_id", id, "path", e.Path, "error", rerr)
			}
		}
		writeError(w, r, s.log, err)
		return
	}
	if len(written) == 0 {
		writeError(w, r, s.log, errdefs.InvalidArgument("the upload has no file parts (each needs a filename)"))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Files []client.FileEntry `json:"files"`
	}{written})
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	path, user := pathQuery(r)
	if err := s.files.Remove(r.Context(), r.PathValue("id"), path, user); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	path, user := pathQuery(r)
	e, err := s.files.Stat(r.Context(), r.PathValue("id"), path, user)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, entryJSON(e))
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	path, user := pathQuery(r)
	depth, err := intParam(r, "depth", 1)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	entries, err := s.files.ListDir(r.Context(), r.PathValue("id"), path, user, depth)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := struct {
		Entries []client.FileEntry `json:"entries"`
	}{Entries: []client.FileEntry{}}
	for _, e := range entries {
		out.Entries = append(out.Entries, entryJSON(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) makeDir(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Path string `json:"path"`
		User string `json:"user,omitempty"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	e, err := s.files.MakeDir(r.Context(), r.PathValue("id"), req.Path, req.User)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, entryJSON(e))
}

func (s *Server) moveFile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
		User        string `json:"user,omitempty"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	e, err := s.files.Move(r.Context(), r.PathValue("id"), req.Source, req.Destination, req.User)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, entryJSON(e))
}

// watchFiles follows the changes under a directory as server-sent events
// named by their op (create, write, remove, rename, chmod; watching once
// the watch is made, and overflow when events were lost), each with the
// path: {"path": ..., "op": ...}. It lasts until the client leaves.
func (s *Server) watchFiles(w http.ResponseWriter, r *http.Request) {
	path, user := pathQuery(r)
	recursive, err := boolQuery(r, "recursive", false)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sse := &sseWriter{w: w}
	err = s.files.Watch(r.Context(), r.PathValue("id"), path, user, recursive, func(ev files.WatchEvent) error {
		return sse.event(ev.Op, client.FileEvent{Path: ev.Path, Op: ev.Op})
	})
	if err != nil && !sse.started {
		writeError(w, r, s.log, err)
		return
	}
	if err != nil && r.Context().Err() == nil {
		_ = sse.event("error", errorBody{Error: describe(err)})
	}
}
