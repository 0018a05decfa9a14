package oci

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// A sandbox whose agent listens itself is created without waiting for it:
// the first dial waits, and ends at once when its process is gone; a
// sandbox not starting fails its dial at once.
func TestDialAgentWhileStarting(t *testing.T) {
	t.Parallel()
	r := New(Config{Name: "test", AgentListens: true, SandboxDir: t.TempDir()})
	h := backend.Handle{ID: "starting"}
	l := r.layout(h.ID)
	if err := os.MkdirAll(l.socketDir, 0o700); err != nil {
		t.Fatal(err)
	}

	if _, err := r.DialAgent(t.Context(), h); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("dial of a sandbox not starting, nothing listening: %v, want unavailable at once", err)
	}

	// Starting, and its process is not there (no pid file): the dial
	// gives up long before the deadline.
	r.starting.Store(h.ID, time.Now().Add(time.Minute))
	began := time.Now()
	_, err := r.DialAgent(t.Context(), h)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "stopped before it listened") {
		t.Errorf("dial while starting, the process gone: %v, want unavailable, saying it stopped", err)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("the dial took %v, waiting for the deadline", took)
	}

	// Starting and listening: the dial connects and the sandbox is no
	// longer starting.
	ln, err := net.Listen("unix", l.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := r.DialAgent(t.Context(), h)
	if err != nil {
		t.Fatalf("dial while starting, the agent listening: %v", err)
	}
	conn.Close()
	if _, ok := r.starting.Load(h.ID); ok {
		t.Error("the sandbox is still starting after its agent answered")
	}
}
