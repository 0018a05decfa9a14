package e2b

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// The limiter keeps a bucket per name, forgets the full ones once there
// are many (a full bucket is as a new one), and limits nothing when nil.
func TestLimiter(t *testing.T) {
	t.Parallel()
	if newLimiter(0, 10) != nil || newLimiter(-1, 10) != nil {
		t.Error("a limiter of no rate limits")
	}
	var none *limiter
	if !none.allow(httptest.NewRecorder(), "x") {
		t.Error("a nil limiter refused a call")
	}
	l := newLimiter(1e6, 1) // refills within a microsecond
	for i := range 3 * minPrune {
		if !l.allow(httptest.NewRecorder(), "sandbox "+strconv.Itoa(i)) {
			t.Fatalf("call %d refused", i)
		}
	}
	if n := len(l.buckets); n > 2*minPrune {
		t.Errorf("%d buckets kept of %d names used once each", n, 3*minPrune)
	}
	slow := newLimiter(0.001, 2)
	for i, want := range []bool{true, true, false} {
		w := httptest.NewRecorder()
		if got := slow.allow(w, "key alice"); got != want {
			t.Errorf("call %d: %v, want %v", i+1, got, want)
		} else if !got && (w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "") {
			t.Errorf("call %d refused with %d, Retry-After %q", i+1, w.Code, w.Header().Get("Retry-After"))
		}
	}
}
