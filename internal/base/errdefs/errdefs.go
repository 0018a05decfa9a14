// Package errdefs defines the few kinds of error Hutch distinguishes. Code
// anywhere wraps one of these sentinels (fmt.Errorf("…: %w", errdefs.ErrNotFound))
// or builds one with a message for the user (errdefs.NotFound("sandbox %s", id));
// callers check kinds with errors.Is only. The API maps each kind to an HTTP
// status in exactly one place.
package errdefs

import (
	"errors"
	"fmt"
)

// The kinds. Their text is the stable code the API reports.
var (
	ErrNotFound           = errors.New("not_found")
	ErrAlreadyExists      = errors.New("already_exists")
	ErrInvalidArgument    = errors.New("invalid_argument")
	ErrFailedPrecondition = errors.New("failed_precondition")
	ErrConflict           = errors.New("conflict")
	ErrResourceExhausted  = errors.New("resource_exhausted")
	ErrUnavailable        = errors.New("unavailable")
	ErrNotImplemented     = errors.New("not_implemented")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrPermissionDenied   = errors.New("permission_denied")
	// ErrBadGateway: a server the daemon passes a request on to (a
	// sandbox's port, for a preview) gave no answer.
	ErrBadGateway = errors.New("bad_gateway")
	// ErrTooLarge: a request (its body, URL or headers) is over a limit.
	ErrTooLarge = errors.New("too_large")
	// ErrRateLimited: a caller made more requests than its rate allows;
	// it may try again shortly.
	ErrRateLimited = errors.New("rate_limited")
	// ErrMisdirected: the call reached a node daemon that does not hold
	// the sandbox it is about (see HeldElsewhere).
	ErrMisdirected = errors.New("misdirected")
)

var kinds = []error{
	ErrNotFound, ErrAlreadyExists, ErrInvalidArgument, ErrFailedPrecondition,
	ErrConflict, ErrResourceExhausted, ErrUnavailable, ErrNotImplemented,
	ErrUnauthenticated, ErrPermissionDenied, ErrBadGateway, ErrTooLarge, ErrRateLimited,
	ErrMisdirected,
}

// Error is an error whose message is meant for the user of the API, with the
// kind it belongs to.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

func newf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// NotFound and the constructors below make an error of their kind whose
// message is safe to show to the user as is.
func NotFound(format string, args ...any) error { return newf(ErrNotFound, format, args...) }
func AlreadyExists(format string, args ...any) error {
	return newf(ErrAlreadyExists, format, args...)
}
func InvalidArgument(format string, args ...any) error {
	return newf(ErrInvalidArgument, format, args...)
}
func FailedPrecondition(format string, args ...any) error {
	return newf(ErrFailedPrecondition, format, args...)
}
func Conflict(format string, args ...any) error { return newf(ErrConflict, format, args...) }
func ResourceExhausted(format string, args ...any) error {
	return newf(ErrResourceExhausted, format, args...)
}
func Unavailable(format string, args ...any) error { return newf(ErrUnavailable, format, args...) }
func NotImplemented(format string, args ...any) error {
	return newf(ErrNotImplemented, format, args...)
}
func Unauthenticated(format string, args ...any) error {
	return newf(ErrUnauthenticated, format, args...)
}
func PermissionDenied(format string, args ...any) error {
	return newf(ErrPermissionDenied, format, args...)
}
func BadGateway(format string, args ...any) error { return newf(ErrBadGateway, format, args...) }
func TooLarge(format string, args ...any) error   { return newf(ErrTooLarge, format, args...) }
func RateLimited(format string, args ...any) error {
	return newf(ErrRateLimited, format, args...)
}

// HeldElsewhere is an ErrMisdirected error: sandbox ID is held by node
// Node, which an API replica sends the call to instead (internal/cluster).
type HeldElsewhere struct {
	ID, Node string
	// Here is the node the call reached.
	Here string
}

func (e *HeldElsewhere) Error() string {
	return fmt.Sprintf("sandbox %s is held by node %s, not by this one (%s): call it through an API replica (hutch serve --role api)", e.ID, e.Node, e.Here)
}

// Unwrap makes it an *Error of kind ErrMisdirected, with its message for
// the user.
func (e *HeldElsewhere) Unwrap() error { return &Error{Kind: ErrMisdirected, Msg: e.Error()} }

// Kind returns the kind err belongs to, or nil when it has none (an internal
// error).
func Kind(err error) error {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// Prefix puts context before an error's message for the user, keeping its
// kind: "Hutchfile line 3 (RUN make): " before "the command failed …". An
// error with no message for the user is wrapped as fmt.Errorf would.
func Prefix(err error, format string, args ...any) error {
	prefix := fmt.Sprintf(format, args...)
	var e *Error
	if errors.As(err, &e) {
		return &Error{Kind: e.Kind, Msg: prefix + ": " + e.Msg}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// UserMessage returns the message of the outermost *Error in err's chain: the
// part written for the user. ok is false when err carries no such message.
func UserMessage(err error) (msg string, ok bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg, true
	}
	return "", false
}
