// Package samples keeps what each sandbox used over time: a hook of the
// kernel (hook.Starter, hook.Claimer, hook.Deleter) whose Run reads every
// running sandbox's CPU, memory, disk, processes and network counters
// every Interval, into a ring per sandbox kept from its create to its
// delete (GET /v1/sandboxes/{id}/metrics, E2B's getMetrics, hutch stats
// --watch). The daemon's own metrics, which name no sandbox, are
// internal/core/metrics'.
package samples

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/network"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// Defaults of Config.
const (
	// DefaultInterval is how often a running sandbox is sampled.
	DefaultInterval = 5 * time.Second
	// DefaultKeep is how many samples a sandbox keeps, the newest: an
	// hour at the default interval, some 60 KiB a sandbox.
	DefaultKeep = 720
)

// Sample is what a sandbox used at Time.
type Sample struct {
	Time time.Time
	// CPUPercent is its CPU use since the sample before, in percent of
	// CPULimit (of one CPU when it has no limit): 100 is its limit.
	CPUPercent float64
	// CPULimit is the CPUs its quota allows (0: no quota).
	CPULimit                 float64
	MemoryBytes, MemoryLimit int64
	DiskUsedBytes            int64
	Pids                     int64
	// NetworkInBytes and NetworkOutBytes are what its connections carried
	// since the daemon started: counters that only grow.
	NetworkInBytes, NetworkOutBytes int64
}

// Config configures a Sampler.
type Config struct {
	// Interval is how often running sandboxes are sampled
	// (DefaultInterval when 0).
	Interval time.Duration
	// Keep is how many samples each sandbox keeps (DefaultKeep when 0).
	Keep int
	// Network is what a sandbox's connections carried (nil: nothing is
	// counted).
	Network func(id string) network.Counters
	Logger  *slog.Logger
}

// Sampler samples the running sandboxes (see the package's doc).
type Sampler struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	running map[string]*source // by sandbox id, while its container runs
	rings   map[string]*ring   // by sandbox id, from its first sample to its delete
}

// source is a running sandbox to sample.
type source struct {
	id      string
	backend backend.Backend
	handle  backend.Handle
	// The CPU time of the last reading and when it was read: the next
	// sample's CPU use is measured from it.
	cpuTime time.Duration
	cpuAt   time.Time
}

// New returns a Sampler; Run samples.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	s := &Sampler{cfg: cfg, log: cfg.Logger, running: map[string]*source{}, rings: map[string]*ring{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Name names the hook.
func (s *Sampler) Name() string { return "samples" }

// Interval is how often a running sandbox is sampled.
func (s *Sampler) Interval() time.Duration { return s.cfg.Interval }

// Start samples sandbox l from the next round on, until stop
// (hook.Starter).
func (s *Sampler) Start(_ context.Context, l hook.Live) (stop func(), err error) {
	src := &source{id: l.ID, backend: l.Backend, handle: l.Handle}
	s.mu.Lock()
	s.running[l.ID] = src
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.running[l.ID] == src {
			delete(s.running, l.ID)
		}
		s.mu.Unlock()
	}, nil
}

// Claimed forgets what a warm pool's sandbox used before a caller took
// it (hook.Claimer): its samples start at its claim.
func (s *Sampler) Claimed(_ context.Context, l hook.Live) {
	s.mu.Lock()
	delete(s.rings, l.ID)
	s.mu.Unlock()
}

// Deleted forgets a deleted sandbox's samples (hook.Deleter).
func (s *Sampler) Deleted(id string) {
	s.mu.Lock()
	delete(s.rings, id)
	delete(s.running, id)
	s.mu.Unlock()
}

// Samples returns sandbox id's samples taken after since, oldest first;
// none for a sandbox not sampled yet (or not known).
func (s *Sampler) Samples(id string, since time.Time) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rings[id]
	if r == nil {
		return nil
	}
	return r.after(since)
}

// Run samples every running sandbox every Interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.round(ctx, time.Now)
		}
	}
}

// round samples each running sandbox once, each reading timed by now as
// it is taken: a tick's own time may be long past on a loaded host, and
// CPU time read later against it would count more than the sandbox can
// use.
func (s *Sampler) round(ctx context.Context, now func() time.Time) {
	s.mu.Lock()
	srcs := make([]*source, 0, len(s.running))
	for _, src := range s.running {
		srcs = append(srcs, src)
	}
	s.mu.Unlock()
	for _, src := range srcs {
		st, err := src.backend.Stats(ctx, src.handle)
		if err != nil {
			continue // stopped meanwhile, or a runtime that cannot say
		}
		s.add(src, st, now().UTC().Truncate(time.Millisecond)) // what every client's clock type holds: since=a sample's time is exact
	}
}

// add records src's reading st, taken at now, as a sample.
func (s *Sampler) add(src *source, st backend.Stats, now time.Time) {
	smp := Sample{
		Time: now, CPULimit: st.CPULimit, MemoryBytes: st.MemoryBytes, MemoryLimit: st.MemoryLimit,
		DiskUsedBytes: st.DiskUsedBytes, Pids: st.Pids,
	}
	if s.cfg.Network != nil {
		c := s.cfg.Network(src.id)
		smp.NetworkInBytes, smp.NetworkOutBytes = c.BytesIn, c.BytesOut
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[src.id] != src {
		return // stopped or deleted while it was read
	}
	if !src.cpuAt.IsZero() && now.After(src.cpuAt) && st.CPUTime >= src.cpuTime {
		share := float64(st.CPUTime-src.cpuTime) / float64(now.Sub(src.cpuAt)) // of one CPU
		limit := st.CPULimit
		if limit <= 0 {
			limit = 1
		}
		smp.CPUPercent = 100 * share / limit
	}
	src.cpuTime, src.cpuAt = st.CPUTime, now
	r := s.rings[src.id]
	if r == nil {
		r = newRing(s.cfg.Keep)
		s.rings[src.id] = r
	}
	r.add(smp)
}

// ring keeps the newest samples of a sandbox.
type ring struct {
	buf  []Sample
	next int // where the next sample goes
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]Sample, n)} }

func (r *ring) add(smp Sample) {
	r.buf[r.next] = smp
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// after is the samples after since, oldest first.
func (r *ring) after(since time.Time) []Sample {
	var all []Sample
	if r.full {
		all = append(all, r.buf[r.next:]...)
	}
	all = append(all, r.buf[:r.next]...)
	for i, smp := range all {
		if smp.Time.After(since) {
			return all[i:]
		}
	}
	return nil
}
