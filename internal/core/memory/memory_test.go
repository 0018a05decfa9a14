package memory

import (
	"context"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
)

// watcher is the fake backend with a memory watch: full is what the
// watch of the last start calls, ended when its ctx is.
type watcher struct {
	*fake.Backend
	mu   sync.Mutex
	full func()
	ctx  context.Context
}

func (w *watcher) Capabilities() backend.Capabilities {
	c := w.Backend.Capabilities()
	c.WatchMemory = w
	return c
}

func (w *watcher) WatchMemory(ctx context.Context, _ backend.Handle, full func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.full, w.ctx = full, ctx
	return nil
}

// Past its memory mark, a sandbox has a process killed, counted in its
// OOM kills until its container stops; a new run counts from none; a
// backend that does not watch memory is left alone.
func TestReclaim(t *testing.T) {
	t.Parallel()
	r := New(nil)
	kills := 0
	r.kill = func(context.Context, hook.Live) (agentclient.Reclaimed, error) {
		kills++
		return agentclient.Reclaimed{Pid: uint32(100 + kills), Name: "hog"}, nil
	}
	w := &watcher{Backend: fake.New(t.TempDir())}
	stop, err := r.Start(t.Context(), hook.Live{ID: "sb1", Backend: w})
	if err != nil || stop == nil {
		t.Fatalf("Start: %v", err)
	}
	w.full()
	w.full()
	var hits backend.LimitHits
	r.CountHits("sb1", &hits)
	if kills != 2 || hits.OOMKills != 2 {
		t.Fatalf("after two marks: %d kills, %d counted", kills, hits.OOMKills)
	}
	stop()
	if w.ctx.Err() == nil {
		t.Error("the watch goes on after stop")
	}
	hits = backend.LimitHits{}
	r.CountHits("sb1", &hits)
	if hits.OOMKills != 0 {
		t.Errorf("counted %d kills of a stopped run", hits.OOMKills)
	}
	if _, err := r.Start(t.Context(), hook.Live{ID: "sb1", Backend: w}); err != nil {
		t.Fatal(err)
	}
	r.CountHits("sb1", &hits)
	if hits.OOMKills != 0 {
		t.Errorf("a new run starts with %d kills counted", hits.OOMKills)
	}
	if stop, err := r.Start(t.Context(), hook.Live{ID: "sb2", Backend: fake.New(t.TempDir())}); stop != nil || err != nil {
		t.Errorf("Start without a memory watch: %v, %v; want nothing", stop != nil, err)
	}
}
