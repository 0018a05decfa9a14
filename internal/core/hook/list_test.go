package hook

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// step is a hook that records its steps in a shared log and fails those
// named in fail.
type step struct {
	name string
	log  *[]string
	fail map[string]bool
}

func (s step) Name() string { return s.name }

func (s step) record(what string) error {
	*s.log = append(*s.log, s.name+" "+what)
	if s.fail[what] {
		return errors.New(what + " refused")
	}
	return nil
}

func (s step) Admit(context.Context, Admission) (func(), error) {
	if err := s.record("admit"); err != nil {
		return nil, err
	}
	return func() { _ = s.record("release") }, nil
}

func (s step) Start(context.Context, Live) (func(), error) {
	if err := s.record("start"); err != nil {
		return nil, err
	}
	return func() { _ = s.record("stop") }, nil
}

func (s step) Import(context.Context, *store.Sandbox, backend.Spec) (*backend.Handle, error) {
	if err := s.record("import"); err != nil {
		return nil, err
	}
	if s.fail["made"] {
		return &backend.Handle{ID: s.name}, nil
	}
	return nil, nil
}

func (s step) Removed(context.Context, string) error { return s.record("removed") }

func (s step) Busy(context.Context, Sandbox) ([]string, error) {
	return []string{s.name + " busy"}, s.record("busy")
}

// Each step runs the hooks in the list's order; a refusal undoes what the
// hooks before it did, the last first, and is named by its hook.
func TestList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var log []string
	l := List{step{"a", &log, nil}, step{"b", &log, nil}, step{"c", &log, map[string]bool{"admit": true, "start": true, "removed": true, "made": true}}}

	if _, err := l.Admit(ctx, Admission{}); err == nil || !slices.Equal(log, []string{"a admit", "b admit", "c admit", "a release", "b release"}) {
		t.Errorf("a refused admission: %v, %v", err, log)
	}
	log = nil
	if _, err := l.Start(ctx, Live{}); err == nil || !strings.HasPrefix(err.Error(), "c: ") || !slices.Equal(log, []string{"a start", "b start", "c start", "b stop", "a stop"}) {
		t.Errorf("a failed start: %v, %v", err, log)
	}
	log = nil
	stop, err := l[:2].Start(ctx, Live{})
	stop()
	if err != nil || !slices.Equal(log, []string{"a start", "b start", "b stop", "a stop"}) {
		t.Errorf("a start and its stop: %v, %v", err, log)
	}
	log = nil
	if h, err := l.Import(ctx, &store.Sandbox{}, backend.Spec{}); err != nil || h == nil || h.ID != "c" {
		t.Errorf("import: %v, %v; want c's", h, err)
	}
	if err := l.Removed(ctx, "sb1"); err == nil || !strings.Contains(err.Error(), "c: removed refused") {
		t.Errorf("removed: %v", err)
	}
	log = nil
	busy, errs := l.Busy(ctx, nil)
	if !slices.Equal(busy, []string{"a busy", "b busy", "c busy"}) || len(errs) != 0 {
		t.Errorf("busy: %v, %v", busy, errs)
	}
}
