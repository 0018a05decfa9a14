package redact

import (
	"io"
	"sync"
)

// Stream redacts an input that arrives in chunks, such as a process's
// output. A secret split across chunks, even one byte per chunk, is still
// caught: the output of Next over every chunk followed by End equals Bytes of
// the whole input, however the input was cut.
//
// A Stream holds back only bytes that could still be the start of a secret
// (at most the length of the longest form, minus one); when the input seen so
// far cannot be, Next returns all of it at once, so interactive output is not
// delayed for nothing.
//
// A Stream is not safe for concurrent use. The zero Stream passes its input
// through unchanged.
type Stream struct {
	set  *Set      // used when live is nil
	live *Redactor // when non-nil, its current Set is used at every call
	pend []byte    // input held back: a proper prefix of some pattern
}

// Stream returns a Stream that redacts with s.
func (s *Set) Stream() *Stream {
	return &Stream{set: s}
}

// current returns the Set to redact with now.
func (st *Stream) current() *Set {
	if st.live != nil {
		return st.live.Set()
	}
	return st.set
}

// Next takes the next chunk of input and returns the redacted bytes that can
// be emitted now; the result is the caller's own. It does not retain chunk.
func (st *Stream) Next(chunk []byte) []byte {
	var dst []byte
	if n := len(st.pend) + len(chunk); n > 0 {
		dst = make([]byte, 0, n) // enough unless a replacement is longer than its value
	}
	return st.appendNext(dst, chunk, false)
}

// End returns the rest of the input, redacted as at the end of the input.
// The Stream is then empty and may be used again for a new input.
func (st *Stream) End() []byte {
	return st.appendNext(nil, nil, true)
}

// appendNext appends the redacted bytes that can be emitted after chunk to
// dst; final means the input ends after chunk.
func (st *Stream) appendNext(dst, chunk []byte, final bool) []byte {
	in := chunk
	held := len(st.pend) > 0
	if held {
		st.pend = append(st.pend, chunk...)
		in = st.pend
	}
	dst, n := st.current().appendRedacted(dst, in, final)
	if held {
		st.pend = st.pend[:copy(st.pend, in[n:])]
	} else {
		st.pend = append(st.pend[:0], in[n:]...)
	}
	return dst
}

// Writer is an io.Writer that redacts what is written to it, as a Stream
// does, and writes the result to an underlying writer. Flush (or Close)
// writes what it holds back.
//
// It is safe for concurrent use, so that a timer may Flush while output is
// written; concurrent writes are redacted as one stream in the order they
// take the lock. After the underlying writer fails, every call returns that
// error.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	st  Stream
	buf []byte // reused output buffer
	err error  // first error from w
}

// Writer returns a Writer that redacts with s and writes to w.
func (s *Set) Writer(w io.Writer) *Writer {
	return &Writer{w: w, st: Stream{set: s}}
}

// Write redacts p and writes what can be written now. It returns len(p) on
// success: all of p was taken, though some of it may be held back until
// more is written or Flush is called.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.emit(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held back, redacted as at the end of the input. A
// secret split across a Flush is not caught, so flush only when the output
// must go out (for instance after a pause in interactive output), or at the
// end.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emit(nil, true)
}

// Close flushes w. It does not close the underlying writer.
func (w *Writer) Close() error {
	return w.Flush()
}

// emit pushes p through the stream and writes the result. The caller holds
// w.mu.
func (w *Writer) emit(p []byte, final bool) error {
	if w.err != nil {
		return w.err
	}
	w.buf = w.st.appendNext(w.buf[:0], p, final)
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = err
		return err
	}
	return nil
}
