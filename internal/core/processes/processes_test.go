package processes

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// records is a Store in memory.
type records struct {
	mu    sync.Mutex
	procs map[string]store.Process // by name
}

func (r *records) ListProcesses(_ context.Context, _ string) ([]*store.Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*store.Process
	for _, name := range slices.Sorted(maps.Keys(r.procs)) {
		p := r.procs[name]
		out = append(out, &p)
	}
	return out, nil
}

func (r *records) PutProcess(_ context.Context, p *store.Process) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs[p.Name] = *p
	return nil
}

func (r *records) running(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[name].Running
}

// sandbox is a hook.Sandbox whose processes are names in a map; those in
// broken fail to start.
type sandbox struct {
	running map[string]uint32
	broken  map[string]bool
	started []string
}

func (s *sandbox) ID() string { return "sb1" }

func (s *sandbox) Agent() *agentclient.Client { return nil }

func (s *sandbox) CommandEnv(context.Context, string, map[string]string) (map[string]string, error) {
	return nil, nil
}

// newKeeper is a Keeper whose sandboxes are sandbox values.
func newKeeper(st Store) *Keeper {
	k := New(st, nil)
	k.running = func(ctx context.Context, sb hook.Sandbox) (map[string]uint32, error) {
		return sb.(*sandbox).Processes(ctx)
	}
	k.start = func(ctx context.Context, sb hook.Sandbox, p *store.Process) (uint32, error) {
		return sb.(*sandbox).StartProcess(ctx, p)
	}
	return k
}

func (s *sandbox) Processes(context.Context) (map[string]uint32, error) {
	return maps.Clone(s.running), nil
}

func (s *sandbox) StartProcess(_ context.Context, p *store.Process) (uint32, error) {
	if s.broken[p.Name] {
		return 0, errors.New("exec: no such file")
	}
	s.started = append(s.started, p.Name)
	s.running[p.Name] = uint32(100 + len(s.running))
	return s.running[p.Name], nil
}

// Before a suspend, which processes run is recorded; after the resume,
// those that ran and do not run are started again, those that did not run
// are not, one that runs already (a memory checkpoint's) is left alone,
// and one that fails to start is marked not running.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := &records{procs: map[string]store.Process{}}
	for _, name := range []string{"web", "worker", "ended", "kept", "broken"} {
		st.procs[name] = store.Process{SandboxID: "sb1", Name: name, Running: true}
	}
	k := newKeeper(st)
	before := &sandbox{running: map[string]uint32{"web": 1, "worker": 2, "kept": 3, "broken": 4}}
	k.Suspending(ctx, before)
	if st.running("ended") || !st.running("web") {
		t.Fatalf("recorded before the suspend: %+v", st.procs)
	}

	after := &sandbox{running: map[string]uint32{"kept": 3}, broken: map[string]bool{"broken": true}}
	k.Resumed(ctx, after)
	if want := []string{"web", "worker"}; !slices.Equal(after.started, want) {
		t.Errorf("started after the resume: %v, want %v", after.started, want)
	}
	if st.running("broken") {
		t.Error("a process that failed to start is still recorded as running")
	}
	if !st.running("kept") || !st.running("web") {
		t.Errorf("records after the resume: %+v", st.procs)
	}
}

// kernel is a hook.Kernel whose live sandboxes are in a map.
type kernel struct{ live map[string]hook.Sandbox }

func (kernel) Lock(context.Context, string) (func(), error) { return func() {}, nil }
func (kernel) Go(fn func())                                 { fn() }
func (k kernel) Peek(id string) (hook.Sandbox, bool) {
	sb, ok := k.live[id]
	return sb, ok
}

// A running background process keeps its sandbox busy, unless it is a
// service; which run is told of a live sandbox only.
func TestBusyAndLive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := &records{procs: map[string]store.Process{
		"web":    {SandboxID: "sb1", Name: "web", Port: 8000, Running: true},
		"worker": {SandboxID: "sb1", Name: "worker", Running: true},
	}}
	k := newKeeper(st)
	sb := &sandbox{running: map[string]uint32{"web": 7}}
	k.Attach(kernel{live: map[string]hook.Sandbox{"sb1": sb}})
	if busy, err := k.Busy(ctx, sb); err != nil || len(busy) != 0 {
		t.Errorf("with a service running: busy %v, %v; want not", busy, err)
	}
	sb.running["worker"] = 8
	if busy, err := k.Busy(ctx, sb); err != nil || !slices.Equal(busy, []string{`background process "worker" (pid 8) running`}) {
		t.Errorf("with a worker running: busy %v, %v", busy, err)
	}
	if live, err := k.Live(ctx, "sb1"); err != nil || !maps.Equal(live, map[string]uint32{"web": 7, "worker": 8}) {
		t.Errorf("Live: %v, %v", live, err)
	}
	if live, err := k.Live(ctx, "suspended"); err != nil || live != nil {
		t.Errorf("Live of a sandbox not live: %v, %v; want nil", live, err)
	}
}
