package processes

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

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
	k := New(st, nil)
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
