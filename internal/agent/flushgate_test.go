package agent

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// countingWriter counts the flushes that reach the connection's writer.
type countingWriter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (w *countingWriter) Flush() { w.flushes++ }

// A stream flushes each event until lastWrites; after it nothing is
// flushed, and everything written reaches the response when it ends.
func TestFlushGate(t *testing.T) {
	under := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
	h := withFlushGate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		_, _ = w.Write([]byte("start "))
		f.Flush()
		lastWrites(r.Context())
		_, _ = w.Write([]byte("end "))
		f.Flush()
		_, _ = w.Write([]byte("eos"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Error(err)
		}
	}))
	h.ServeHTTP(under, httptest.NewRequest(http.MethodPost, "/", nil))
	if under.flushes != 1 {
		t.Errorf("%d flushes reached the connection, want 1 (before lastWrites)", under.flushes)
	}
	if got := under.Body.String(); got != "start end eos" {
		t.Errorf("body %q", got)
	}
}
