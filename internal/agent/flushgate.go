package agent

import (
	"context"
	"net/http"
	"sync/atomic"
)

// A process's stream ends with three writes to the daemon's connection
// when each is flushed on its own: the end event, Connect's end of stream,
// and HTTP's last chunk. Under gVisor each write is a system call that
// leaves the sandbox, and each wakes the daemon's reader. Once the end
// event is the last thing to send, the stream's handler closes its flush
// gate: nothing is flushed until the handler returns, when net/http writes
// all three at once.

// flushGate drops a response's flushes once closed.
type flushGate struct{ closed atomic.Bool }

type flushGateKey struct{}

// gatedWriter is a ResponseWriter whose Flush goes through a gate.
type gatedWriter struct {
	http.ResponseWriter
	gate *flushGate
}

func (w *gatedWriter) Flush() {
	if w.gate.closed.Load() {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *gatedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withFlushGate gives each request to h a flush gate, in its context.
func withFlushGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate := &flushGate{}
		h.ServeHTTP(&gatedWriter{ResponseWriter: w, gate: gate}, r.WithContext(context.WithValue(r.Context(), flushGateKey{}, gate)))
	})
}

// lastWrites closes the flush gate of ctx's request, if it has one: what
// the handler sends from now on goes out when it returns.
func lastWrites(ctx context.Context) {
	if g, ok := ctx.Value(flushGateKey{}).(*flushGate); ok {
		g.closed.Store(true)
	}
}
