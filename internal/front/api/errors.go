package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// errorBody is the JSON every error answers with.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// statusOf maps an error kind to its HTTP status and code. This is the only
// place that decides it.
func statusOf(err error) (int, string) {
	switch kind := errdefs.Kind(err); kind {
	case errdefs.ErrNotFound:
		return http.StatusNotFound, kind.Error()
	case errdefs.ErrAlreadyExists, errdefs.ErrConflict:
		return http.StatusConflict, kind.Error()
	case errdefs.ErrInvalidArgument:
		return http.StatusBadRequest, kind.Error()
	case errdefs.ErrFailedPrecondition:
		return http.StatusPreconditionFailed, kind.Error()
	case errdefs.ErrResourceExhausted:
		return http.StatusTooManyRequests, kind.Error()
	case errdefs.ErrUnavailable:
		return http.StatusServiceUnavailable, kind.Error()
	case errdefs.ErrNotImplemented:
		return http.StatusNotImplemented, kind.Error()
	case errdefs.ErrUnauthenticated:
		return http.StatusUnauthorized, kind.Error()
	case errdefs.ErrPermissionDenied:
		return http.StatusForbidden, kind.Error()
	case errdefs.ErrBadGateway:
		return http.StatusBadGateway, kind.Error()
	case errdefs.ErrTooLarge:
		return http.StatusRequestEntityTooLarge, kind.Error()
	case errdefs.ErrRateLimited:
		return http.StatusTooManyRequests, kind.Error()
	case errdefs.ErrMisdirected:
		return http.StatusMisdirectedRequest, kind.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, "timeout"
	}
	return http.StatusInternalServerError, "internal"
}

// describe returns what the user reads about err. Errors without a message
// written for the user (internal ones) say only that something went wrong:
// their detail goes to the log, never to the client.
func describe(err error) errorDetail {
	status, code := statusOf(err)
	if msg, ok := errdefs.UserMessage(err); ok {
		return errorDetail{Code: code, Message: msg}
	}
	if status == http.StatusInternalServerError {
		return errorDetail{Code: code, Message: "internal error; the daemon's log has the details"}
	}
	return errorDetail{Code: code, Message: http.StatusText(status)}
}

// HeaderNode, on a misdirected call's answer, names the node that holds
// its sandbox.
const HeaderNode = "Hutch-Node"

// WriteError answers with err as the API does: for what answers in its
// stead (an API replica, internal/cluster).
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	writeError(w, r, log, err)
}

// writeError answers with err as JSON, logging internal errors.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, code := statusOf(err)
	if rec, ok := w.(*recorder); ok {
		rec.code = code // for the audit log
	}
	if status == http.StatusInternalServerError {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	var elsewhere *errdefs.HeldElsewhere
	if errors.As(err, &elsewhere) {
		w.Header().Set(HeaderNode, elsewhere.Node) // where an API replica sends it instead
	}
	writeJSON(w, status, errorBody{Error: describe(err)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}
