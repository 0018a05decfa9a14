package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/trust/audit"
)

// The audit log: who (key, workspace, user) did what to which object, and
// how it ended, for every call that changes state or reads a file or a
// secret's existence. Entries hold the route and the object's name, never
// a body: no secret's value and no file's content reaches the log.

// AuditLog is where entries go (internal/trust/audit).
type AuditLog interface {
	Record(ctx context.Context, e audit.Entry)
	List(ctx context.Context, f audit.Filter) ([]audit.Entry, error)
}

// audited says whether a call of route pattern (method and path) is
// recorded: every change, reads of files and of secrets, and terminal
// sessions (a GET, whose typing may change anything).
func audited(pattern string) bool {
	method, p, _ := strings.Cut(pattern, " ")
	if method != http.MethodGet {
		return true
	}
	return strings.Contains(p, "/files") || strings.HasPrefix(p, "/v1/downloads/") || strings.HasPrefix(p, "/v1/secrets") ||
		strings.HasSuffix(p, "/pty")
}

// recorder is a ResponseWriter that keeps the answer's status and error
// code for the audit log, and redacts every secret the daemon knows of
// from the body (see redaction.go).
type recorder struct {
	http.ResponseWriter
	status int
	code   string
	done   func()
	// redact, when not nil, redacts the body as it is written.
	redact *redact.Stream
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		if w.redact != nil {
			w.Header().Del("Content-Length") // a redacted body has another length
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write writes b redacted; it returns len(b) on success, what it was given.
func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.redact == nil {
		return w.ResponseWriter.Write(b)
	}
	if _, err := w.ResponseWriter.Write(w.redact.Next(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// end writes what redaction held back: the body is complete.
func (w *recorder) end() {
	if w.redact != nil {
		if rest := w.redact.End(); len(rest) > 0 {
			_, _ = w.ResponseWriter.Write(rest) // the client may be gone
		}
	}
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// event streams, deadlines).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on, for handlers that assert http.Flusher.
func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// auditNote is what a handler adds to its call's audit entry: the id of
// what it made.
type auditNote struct{ object string }

type auditNoteKey struct{}

// noteObject names what the call made (a new sandbox's id), for its
// audit entry.
func noteObject(r *http.Request, object string) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
		n.object = object
	}
}

// auditing returns w as a recorder whose done records the call, if its
// route is recorded (see audited), once the handler has answered; and r,
// with room for noteObject.
func (s *Server) auditing(w http.ResponseWriter, r *http.Request, pattern string, recorded bool, c caller) (*recorder, *http.Request) {
	rec := &recorder{ResponseWriter: w, redact: s.responseRedaction()}
	rec.done = rec.end
	if s.audit == nil || !recorded {
		return rec, r
	}
	note := &auditNote{}
	r = r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note))
	rec.done = func() {
		rec.end()
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		e := audit.Entry{
			Time: time.Now().UTC(), Key: c.key, Workspace: c.workspace, User: c.user,
			Action: pattern, Object: auditObject(r), Status: status, Code: rec.code,
		}
		if note.object != "" {
			e.Object = strings.TrimSpace(note.object + " " + e.Object)
		}
		// A path a caller gave may hold a value it should not have.
		e.Object = s.redactor.Set().String(e.Object)
		if c.anonymous {
			e.Key = "(download URL)"
		}
		s.audit.Record(r.Context(), e)
	}
	return rec, r
}

// auditObject names what a call acted on: its path's object (and, for
// files, the file's path), never more.
func auditObject(r *http.Request) string {
	var parts []string
	for _, name := range []string{"id", "name", "token", "w"} {
		if v := r.PathValue(name); v != "" {
			if name == "token" {
				v = "(signed)"
			}
			parts = append(parts, v)
		}
	}
	if p := r.URL.Query().Get("path"); p != "" {
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// listAudit answers GET /v1/audit: the administrator's, every
// workspace's (or ?workspace=); a key's, its workspace's.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	before, err := intParam(r, "before", 0)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	limit, err := intParam(r, "limit", 100)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	limit = min(max(limit, 1), 1000)
	list, err := s.audit.List(r.Context(), audit.Filter{Workspace: callerOf(r.Context()).filter(r), Before: int64(before), Limit: limit})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := client.AuditLog{Entries: []client.AuditEntry{}}
	for _, e := range list {
		out.Entries = append(out.Entries, client.AuditEntry{
			ID: e.ID, Time: e.Time, Key: e.Key, Workspace: e.Workspace, User: e.User,
			Action: e.Action, Object: e.Object, Status: e.Status, Code: e.Code,
		})
	}
	writeJSON(w, http.StatusOK, out)
}
