package redact

import (
	"io"
	"sync/atomic"
)

// Redactor holds the daemon's current Set, which changes as users add and
// remove secrets. It is safe for concurrent use. The zero Redactor, and a
// nil *Redactor, redact nothing, so callers need no nil checks.
type Redactor struct {
	set atomic.Pointer[Set]
}

// Replace compiles secrets and makes them the current set, at once for every
// caller. On a nil Redactor it does nothing.
func (r *Redactor) Replace(secrets []Secret) {
	if r == nil {
		return
	}
	r.set.Store(NewSet(secrets))
}

// Set returns the current set; it may be nil, which redacts nothing.
func (r *Redactor) Set() *Set {
	if r == nil {
		return nil
	}
	return r.set.Load()
}

// Stream returns a Stream that redacts with the current set at every call,
// so that a long-running stream (a process's log) also catches secrets added
// after it started. A value held back under the old set is redacted under the
// new one; bytes already returned are not revisited.
func (r *Redactor) Stream() *Stream {
	return &Stream{live: r}
}

// Writer returns a Writer over w that, like Stream, redacts with the current
// set at every call.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return &Writer{w: w, st: Stream{live: r}}
}
