package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		wantMsg    string
	}{
		{"not found", errdefs.NotFound("sandbox x not found"), 404, "not_found", "sandbox x not found"},
		{"wrapped keeps the user message", fmt.Errorf("exec in sandbox x: %w", errdefs.InvalidArgument("cwd /nope does not exist")), 400, "invalid_argument", "cwd /nope does not exist"},
		{"bare kind", fmt.Errorf("thing: %w", errdefs.ErrConflict), 409, "conflict", "Conflict"},
		{"precondition", errdefs.FailedPrecondition("sandbox x is error, not running"), 412, "failed_precondition", "sandbox x is error, not running"},
		{"unavailable", errdefs.Unavailable("agent unavailable"), 503, "unavailable", "agent unavailable"},
		{"unauthenticated", errdefs.Unauthenticated("missing key"), 401, "unauthenticated", "missing key"},
		{"bad gateway", errdefs.BadGateway("nothing listens on port 3000 in the sandbox"), 502, "bad_gateway", "nothing listens on port 3000 in the sandbox"},
		{"too large", errdefs.TooLarge("the body is over 8 MiB"), 413, "too_large", "the body is over 8 MiB"},
		{"rate limited", errdefs.RateLimited("slow down"), 429, "rate_limited", "slow down"},
		{"deadline", fmt.Errorf("destroy: %w", context.DeadlineExceeded), 504, "timeout", "Gateway Timeout"},
		{"internal detail stays in the log", errors.New("mount /var/lib/hutch/secret: EPERM"), 500, "internal", "internal error; the daemon's log has the details"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
			writeError(rec, req, slog.New(slog.DiscardHandler), tt.err)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			var body errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q is not the error JSON: %v", rec.Body, err)
			}
			if body.Error.Code != tt.wantCode || body.Error.Message != tt.wantMsg {
				t.Fatalf("got %+v, want code %q message %q", body.Error, tt.wantCode, tt.wantMsg)
			}
			if strings.Contains(rec.Body.String(), "/var/lib/hutch") {
				t.Fatal("internal detail leaked into the response")
			}
		})
	}
}

func TestSplitUTF8(t *testing.T) {
	euro := []byte("€") // 3 bytes
	tests := []struct {
		name           string
		in             []byte
		complete, rest string
	}{
		{"ascii", []byte("abc"), "abc", ""},
		{"whole rune", append([]byte("a"), euro...), "a€", ""},
		{"cut after 1 byte", append([]byte("a"), euro[:1]...), "a", string(euro[:1])},
		{"cut after 2 bytes", append([]byte("a"), euro[:2]...), "a", string(euro[:2])},
		{"invalid byte is not held back", []byte{'a', 0xff}, "a\xff", ""},
		{"empty", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			complete, rest := splitUTF8(tt.in)
			if string(complete) != tt.complete || string(rest) != tt.rest {
				t.Fatalf("splitUTF8(%q) = %q, %q; want %q, %q", tt.in, complete, rest, tt.complete, tt.rest)
			}
		})
	}
}
