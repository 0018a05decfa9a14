package sandbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/backend"
)

// countingBackend counts its probes.
type countingBackend struct {
	backend.Backend
	probes atomic.Int32
}

func (b *countingBackend) Probe(ctx context.Context) backend.Health {
	b.probes.Add(1)
	return b.Backend.Probe(ctx)
}

// A health check tells what the backends' last probe found: they are
// probed again only once that is probeEvery old.
func TestHealthProbesAtMostEveryInterval(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	var counted *countingBackend
	d := newDaemonState(t).start(t, withClock(clock), func(cfg *Config) {
		counted = &countingBackend{Backend: cfg.Backends[0]}
		cfg.Backends = []backend.Backend{counted}
	})
	ctx := t.Context()
	first := d.m.Health(ctx)
	if len(first.Backends) != 1 || !first.Backends[0].Usable {
		t.Fatalf("health: %+v", first)
	}
	for range 5 {
		d.m.Health(ctx)
	}
	if n := counted.probes.Load(); n != 1 {
		t.Errorf("6 health checks within %v probed %d times, want 1", probeEvery, n)
	}
	clock.advance(probeEvery + time.Second)
	d.m.Health(ctx)
	if n := counted.probes.Load(); n != 2 {
		t.Errorf("a health check after %v probed %d times in all, want 2", probeEvery, n)
	}
}
