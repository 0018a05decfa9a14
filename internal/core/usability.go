package core

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// usability is which backends sandboxes may not be made with, and why. Most
// such are so for the daemon's life (no runc on the host); a pending one is
// being set up (./setup builds gVisor's runsc in the background while the
// daemon serves) and is probed again when a create asks for it, at most
// every pendingProbeEvery, until it is usable or found broken.
type usability struct {
	mu       sync.Mutex
	unusable map[string]string    // why, by backend name
	pending  map[string]time.Time // when each pending one was last probed
}

// pendingProbeEvery bounds how often a pending backend is probed again.
const pendingProbeEvery = time.Second

func newUsability(unusable map[string]string, pending map[string]bool) *usability {
	u := &usability{unusable: map[string]string{}, pending: map[string]time.Time{}}
	for name, why := range unusable {
		u.unusable[name] = why
		if pending[name] {
			u.pending[name] = time.Time{}
		}
	}
	return u
}

// check says why be may not be used ("" when it may), and whether it is
// pending; a pending backend is probed again first when due.
func (u *usability) check(ctx context.Context, be backend.Backend, now time.Time, log *slog.Logger) (why string, pending bool) {
	name := be.Name()
	u.mu.Lock()
	defer u.mu.Unlock()
	why, bad := u.unusable[name]
	if !bad {
		return "", false
	}
	last, pending := u.pending[name]
	if !pending || now.Sub(last) < pendingProbeEvery {
		return why, pending
	}
	switch h := be.Probe(ctx); {
	case h.Usable:
		delete(u.unusable, name)
		delete(u.pending, name)
		log.Info("backend ready: sandboxes are created with it now", "backend", name, "binary", h.Binary, "version", h.Version)
		return "", false
	case h.Pending:
		u.unusable[name], u.pending[name] = h.Reason, now
		return h.Reason, true
	default:
		delete(u.pending, name)
		u.unusable[name] = h.Reason
		log.Warn("backend not usable after all: no sandbox is created with it", "backend", name, "reason", h.Reason)
		return h.Reason, false
	}
}

// broken says whether backend name may not be used now.
func (u *usability) broken(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, bad := u.unusable[name]
	return bad
}

// settingUp says whether backend name is being set up ("" for any).
func (u *usability) settingUp(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if name == "" {
		return len(u.pending) > 0
	}
	_, ok := u.pending[name]
	return ok
}
