package core

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/testclock"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/runtime/backend"
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
// probed again only once that is backend.ProbeEvery old.
func TestHealthProbesAtMostEveryInterval(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
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
		t.Errorf("6 health checks within %v probed %d times, want 1", backend.ProbeEvery, n)
	}
	clock.Advance(backend.ProbeEvery + time.Second)
	d.m.Health(ctx)
	if n := counted.probes.Load(); n != 2 {
		t.Errorf("a health check after %v probed %d times in all, want 2", backend.ProbeEvery, n)
	}
}

// settingUp is a backend being set up until ready: its probe says pending.
type settingUp struct {
	backend.Backend
	ready  atomic.Bool
	probes atomic.Int32
}

func (b *settingUp) Probe(ctx context.Context) backend.Health {
	b.probes.Add(1)
	if !b.ready.Load() {
		return backend.Health{Name: b.Name(), Pending: true, Reason: "its binary is being built"}
	}
	return b.Backend.Probe(ctx)
}

// A backend pending at start (./setup building runsc) answers creates
// unavailable, saying why, and is probed again at most every
// backend.PendingProbeEvery; once its probe finds it usable, creates get it, with
// no restart.
func TestPendingBackendBecomesUsable(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	var be *settingUp
	d := newDaemonState(t).start(t, withClock(clock), func(cfg *Config) {
		be = &settingUp{Backend: cfg.Backends[0]}
		cfg.Backends = []backend.Backend{be}
		cfg.Unusable = map[string]string{be.Name(): "its binary is being built"}
		cfg.Pending = map[string]bool{be.Name(): true}
	})
	ctx := t.Context()
	for range 3 {
		if _, err := d.m.create(ctx, create.Options{}); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "is being built") {
			t.Fatalf("create while pending: %v; want unavailable, saying why", err)
		}
	}
	if n := be.probes.Load(); n != 1 {
		t.Errorf("3 creates within %v probed %d times, want 1", backend.PendingProbeEvery, n)
	}
	be.ready.Store(true)
	if _, err := d.m.create(ctx, create.Options{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("create before the next probe is due: %v; want still unavailable", err)
	}
	clock.Advance(backend.PendingProbeEvery)
	sb, err := d.m.create(ctx, create.Options{})
	if err != nil {
		t.Fatalf("create once ready: %v", err)
	}
	t.Cleanup(func() { _ = d.m.Delete(context.Background(), sb.ID) })
	if sb.Backend != be.Name() {
		t.Errorf("runtime %q, want %q", sb.Backend, be.Name())
	}
}
