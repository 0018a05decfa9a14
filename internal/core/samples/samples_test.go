package samples

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// statsBackend answers Stats with what the test set for each sandbox; the
// Sampler calls nothing else.
type statsBackend struct {
	backend.Backend
	mu    sync.Mutex
	stats map[string]backend.Stats
}

func (b *statsBackend) set(id string, st backend.Stats) {
	b.mu.Lock()
	b.stats[id] = st
	b.mu.Unlock()
}

func (b *statsBackend) Stats(_ context.Context, h backend.Handle) (backend.Stats, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats[h.ID], nil
}

func TestSampler(t *testing.T) {
	t.Parallel()
	be := &statsBackend{stats: map[string]backend.Stats{}}
	s := New(Config{Keep: 3, Network: func(id string) network.Counters {
		return network.Counters{BytesIn: 1000, BytesOut: int64(len(id))}
	}})
	ctx := t.Context()
	start := func(id string) func() {
		stop, err := s.Start(ctx, hook.Live{ID: id, Backend: be, Handle: backend.Handle{ID: id}})
		if err != nil {
			t.Fatal(err)
		}
		return stop
	}
	stopA := start("sba")
	start("sbb")
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	be.set("sba", backend.Stats{CPUTime: time.Second, CPULimit: 1, MemoryBytes: 10 << 20, MemoryLimit: 512 << 20, Pids: 3})
	be.set("sbb", backend.Stats{CPUTime: time.Second, CPULimit: 0.5})
	s.round(ctx, at(t0))
	be.set("sba", backend.Stats{CPUTime: 1500 * time.Millisecond, CPULimit: 1, MemoryBytes: 20 << 20, MemoryLimit: 512 << 20, Pids: 4, DiskUsedBytes: 7})
	be.set("sbb", backend.Stats{CPUTime: 1500 * time.Millisecond, CPULimit: 0.5})
	s.round(ctx, at(t0.Add(time.Second)))

	a := s.Samples("sba", time.Time{})
	if len(a) != 2 {
		t.Fatalf("sba has %d samples, want 2: %+v", len(a), a)
	}
	if a[0].CPUPercent != 0 || a[1].CPUPercent != 50 {
		t.Errorf("sba's CPU: %v then %v, want 0 (no reading before) then 50 (half a second of its one CPU in a second)", a[0].CPUPercent, a[1].CPUPercent)
	}
	if got := a[1]; got.MemoryBytes != 20<<20 || got.MemoryLimit != 512<<20 || got.Pids != 4 || got.DiskUsedBytes != 7 ||
		got.NetworkInBytes != 1000 || got.NetworkOutBytes != 3 || !got.Time.Equal(t0.Add(time.Second)) || got.CPULimit != 1 {
		t.Errorf("sba's second sample: %+v", got)
	}
	if b := s.Samples("sbb", t0); len(b) != 1 || b[0].CPUPercent != 100 {
		t.Errorf("sbb after its first sample: %+v, want one at 100%% (half a CPU of its half)", b)
	}

	// The ring keeps the newest Keep.
	for i := 2; i < 6; i++ {
		s.round(ctx, at(t0.Add(time.Duration(i)*time.Second)))
	}
	if a := s.Samples("sba", time.Time{}); len(a) != 3 || !a[0].Time.Equal(t0.Add(3*time.Second)) || !a[2].Time.Equal(t0.Add(5*time.Second)) {
		t.Errorf("after 6 rounds, sba keeps %+v, want the last 3", a)
	}
	// Stopped (suspended): no new samples, the old ones kept.
	stopA()
	s.round(ctx, at(t0.Add(10*time.Second)))
	if a := s.Samples("sba", t0.Add(5*time.Second)); len(a) != 0 {
		t.Errorf("a stopped sandbox was sampled: %+v", a)
	}
	if a := s.Samples("sba", time.Time{}); len(a) != 3 {
		t.Errorf("a stopped sandbox lost its samples: %+v", a)
	}
	// Claimed from a warm pool: what it used before is not the caller's.
	s.Claimed(ctx, hook.Live{ID: "sbb"})
	if b := s.Samples("sbb", time.Time{}); len(b) != 0 {
		t.Errorf("a claimed sandbox keeps the pool's samples: %+v", b)
	}
	s.Deleted("sba")
	if a := s.Samples("sba", time.Time{}); a != nil {
		t.Errorf("a deleted sandbox keeps samples: %+v", a)
	}
}

// Run samples on its interval until its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	be := &statsBackend{stats: map[string]backend.Stats{}}
	s := New(Config{Interval: 10 * time.Millisecond})
	if _, err := s.Start(t.Context(), hook.Live{ID: "sba", Backend: be, Handle: backend.Handle{ID: "sba"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Samples("sba", time.Time{})) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("Run took no 3 samples in 5 s at an interval of 10 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// at is a clock that says t.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }
