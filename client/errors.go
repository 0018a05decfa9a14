package client

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// The error codes of the API.
const (
	CodeInvalidArgument    = "invalid_argument"
	CodeUnauthenticated    = "unauthenticated"
	CodePermissionDenied   = "permission_denied"
	CodeNotFound           = "not_found"
	CodeAlreadyExists      = "already_exists"
	CodeConflict           = "conflict"
	CodeFailedPrecondition = "failed_precondition"
	CodeResourceExhausted  = "resource_exhausted"
	CodeInternal           = "internal"
	CodeNotImplemented     = "not_implemented"
	CodeUnavailable        = "unavailable"
	// CodeBadGateway: a preview's server in the sandbox gave no answer
	// (nothing listens on its port, or it closed the connection).
	CodeBadGateway = "bad_gateway"
	// CodeTooLarge: a request's body, URL or headers are over a limit.
	CodeTooLarge = "too_large"
	// CodeRateLimited: the key made more requests than its rate allows;
	// try again after the Retry-After the answer gives.
	CodeRateLimited = "rate_limited"
	// CodeMisdirected: the call reached a node daemon that does not hold
	// its sandbox; call through an API replica (hutch serve --role api).
	CodeMisdirected = "misdirected"
)

// Error is an error answered by the daemon. StatusCode is 0 for an error
// reported inside an exec event stream.
type Error struct {
	StatusCode int
	Code       string
	Message    string
}

func (e *Error) Error() string { return e.Message }

// IsUnavailable reports whether err is the API's unavailable error: the
// daemon, or the node holding the sandbox, cannot answer now.
func IsUnavailable(err error) bool { return hasCode(err, CodeUnavailable) }

// IsNotFound reports whether err is the API's not_found error.
func IsNotFound(err error) bool { return hasCode(err, CodeNotFound) }

// IsAlreadyExists reports whether err is the API's already_exists error.
func IsAlreadyExists(err error) bool { return hasCode(err, CodeAlreadyExists) }

// IsConflict reports whether err is the API's conflict error: the call
// clashes with the state of what it names (a volume in use, a process
// running already).
func IsConflict(err error) bool { return hasCode(err, CodeConflict) }

// IsUnauthenticated reports whether err is the API's unauthenticated error.
func IsUnauthenticated(err error) bool { return hasCode(err, CodeUnauthenticated) }

// IsPermissionDenied reports whether err is the API's permission_denied
// error: the key is known but may not do that.
func IsPermissionDenied(err error) bool { return hasCode(err, CodePermissionDenied) }

// IsInvalidArgument reports whether err is the API's invalid_argument error.
func IsInvalidArgument(err error) bool { return hasCode(err, CodeInvalidArgument) }

// IsFailedPrecondition reports whether err is a request the sandbox is not
// in a state or shape to serve (not running; lacking a language's runtime).
func IsFailedPrecondition(err error) bool { return hasCode(err, CodeFailedPrecondition) }

func hasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// errorBody is the JSON shape of every API error.
type errorBody struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// decodeError turns a non-2xx response into an *Error. A body that is not the
// API's JSON (a proxy's page, say) still gives a usable message.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{StatusCode: resp.StatusCode}
	var eb errorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	}
	if e.Code == "" {
		e.Code = codeForStatus(resp.StatusCode)
	}
	if e.Message == "" {
		e.Message = resp.Status
		if s := strings.TrimSpace(string(b)); s != "" && eb.Error == nil && len(s) <= 200 {
			e.Message += ": " + s
		}
	}
	return e
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusPreconditionFailed:
		return CodeFailedPrecondition
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		return CodeResourceExhausted
	case http.StatusNotImplemented:
		return CodeNotImplemented
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return CodeUnavailable
	}
	return CodeInternal
}
