package backend

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
)

// Set is the runtimes a daemon makes sandboxes with, by name, with the
// default one and which of them may not be used, and why. Most unusable
// ones are so for the daemon's life (no runc on the host); a pending one
// is being set up (./setup builds gVisor's runsc in the background while
// the daemon serves) and is probed again when a create asks for it, at
// most every PendingProbeEvery, until it is usable or found broken. Its
// methods are safe for concurrent use.
type Set struct {
	byName    map[string]Backend
	def       string
	defReason string
	log       *slog.Logger

	mu       sync.Mutex
	unusable map[string]string    // why, by backend name
	pending  map[string]time.Time // when each pending one was last probed

	// probeMu guards the last probe of every backend (see Probe).
	probeMu  sync.Mutex
	probes   []Health
	probedAt time.Time
}

// SetConfig describes a Set.
type SetConfig struct {
	Backends []Backend
	// Default is the backend a create that names none gets, and
	// DefaultReason why.
	Default, DefaultReason string
	// Unusable names the backends found unusable at start, with why: no
	// sandbox is made with them, but theirs are still recovered and
	// deleted. Pending names those of them being set up.
	Unusable map[string]string
	Pending  map[string]bool
	Logger   *slog.Logger
}

// Probe pacing.
const (
	// ProbeEvery is how long what the backends' probes found is told
	// again before they are probed anew. A probe runs the runtimes'
	// binaries: a health check polled every second (a load balancer's, a
	// console's) must not fork them every time, nor wait for them on a
	// loaded host.
	ProbeEvery = 30 * time.Second
	// PendingProbeEvery bounds how often a pending backend is probed
	// again.
	PendingProbeEvery = time.Second
)

// NewSet returns the set cfg describes; its default must be one of its
// backends.
func NewSet(cfg SetConfig) (*Set, error) {
	s := &Set{byName: map[string]Backend{}, def: cfg.Default, defReason: cfg.DefaultReason, log: cfg.Logger,
		unusable: map[string]string{}, pending: map[string]time.Time{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, b := range cfg.Backends {
		s.byName[b.Name()] = b
	}
	if _, ok := s.byName[s.def]; !ok {
		return nil, fmt.Errorf("default runtime %q is not one of the configured backends", s.def)
	}
	for name, why := range cfg.Unusable {
		s.unusable[name] = why
		if cfg.Pending[name] {
			s.pending[name] = time.Time{}
		}
	}
	return s, nil
}

// Get is backend name, nil when there is none of that name.
func (s *Set) Get(name string) Backend { return s.byName[name] }

// Names are the backends' names, sorted.
func (s *Set) Names() []string { return slices.Sorted(maps.Keys(s.byName)) }

// Default is the backend a create that names none gets, and why.
func (s *Set) Default() (name, reason string) { return s.def, s.defReason }

// For is the backend a create asks for by name ("": the default), at
// now: an InvalidArgument when there is none of that name, Unavailable
// while it is being set up, FailedPrecondition when it cannot be used. A
// pending one is probed again first when due.
func (s *Set) For(ctx context.Context, name string, now time.Time) (Backend, error) {
	if name == "" {
		name = s.def
	}
	be, ok := s.byName[name]
	if !ok {
		return nil, errdefs.InvalidArgument("runtime must be one of %s, got %q", strings.Join(s.Names(), ", "), name)
	}
	switch why, pending := s.check(ctx, be, now); {
	case pending:
		return nil, errdefs.Unavailable("runtime %s is not ready yet: %s", name, why)
	case why != "":
		return nil, errdefs.FailedPrecondition("runtime %s is not usable on this host: %s", name, why)
	}
	return be, nil
}

// check says why be may not be used ("" when it may), and whether it is
// pending; a pending backend is probed again first when due.
func (s *Set) check(ctx context.Context, be Backend, now time.Time) (why string, pending bool) {
	name := be.Name()
	s.mu.Lock()
	defer s.mu.Unlock()
	why, bad := s.unusable[name]
	if !bad {
		return "", false
	}
	last, pending := s.pending[name]
	if !pending || now.Sub(last) < PendingProbeEvery {
		return why, pending
	}
	switch h := be.Probe(ctx); {
	case h.Usable:
		delete(s.unusable, name)
		delete(s.pending, name)
		s.log.Info("backend ready: sandboxes are created with it now", "backend", name, "binary", h.Binary, "version", h.Version)
		return "", false
	case h.Pending:
		s.unusable[name], s.pending[name] = h.Reason, now
		return h.Reason, true
	default:
		delete(s.pending, name)
		s.unusable[name] = h.Reason
		s.log.Warn("backend not usable after all: no sandbox is created with it", "backend", name, "reason", h.Reason)
		return h.Reason, false
	}
}

// Usable names the backends sandboxes may be made with now.
func (s *Set) Usable() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, name := range s.Names() {
		if _, bad := s.unusable[name]; !bad {
			out = append(out, name)
		}
	}
	return out
}

// SettingUp says whether backend name is being set up ("" for any).
func (s *Set) SettingUp(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		return len(s.pending) > 0
	}
	_, ok := s.pending[name]
	return ok
}

// Probe returns what every backend's Probe found, at most ProbeEvery
// before now; while one is being set up, afresh (a create waiting for it
// looks here to know when to try again).
func (s *Set) Probe(ctx context.Context, now time.Time) []Health {
	settingUp := s.SettingUp("")
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probes == nil || now.Sub(s.probedAt) >= ProbeEvery || settingUp {
		s.probes = s.probes[:0]
		for _, name := range s.Names() {
			s.probes = append(s.probes, s.byName[name].Probe(ctx))
		}
		s.probedAt = now
	}
	return slices.Clone(s.probes)
}
