package backend_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/runtime/fake"
)

// named is a fake backend of another name whose probe says what health
// holds, and counts.
type named struct {
	*fake.Backend
	name   string
	health backend.Health
	probes int
}

func (n *named) Name() string { return n.name }

func (n *named) Probe(context.Context) backend.Health {
	n.probes++
	return n.health
}

// A set gives a create the backend it names, or the default; refuses
// one it does not have, one found unusable and, until its probe says it
// is ready, one being set up; and tells its probes, at most every
// ProbeEvery.
func TestSet(t *testing.T) {
	ctx := t.Context()
	runc := &named{Backend: fake.New(t.TempDir()), name: "runc", health: backend.Health{Name: "runc", Usable: true}}
	runsc := &named{Backend: fake.New(t.TempDir()), name: "runsc", health: backend.Health{Name: "runsc", Pending: true, Reason: "building runsc"}}
	broken := &named{Backend: fake.New(t.TempDir()), name: "crun", health: backend.Health{Name: "crun", Reason: "hybrid cgroups"}}
	if _, err := backend.NewSet(backend.SetConfig{Backends: []backend.Backend{runc}, Default: "runsc"}); err == nil {
		t.Error("a set whose default it does not have was made")
	}
	s, err := backend.NewSet(backend.SetConfig{
		Backends: []backend.Backend{runc, runsc, broken}, Default: "runc", DefaultReason: "the host's",
		Unusable: map[string]string{"runsc": "building runsc", "crun": "hybrid cgroups"}, Pending: map[string]bool{"runsc": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if be, err := s.For(ctx, "", now); err != nil || be.Name() != "runc" {
		t.Errorf("the default: %v, %v", be, err)
	}
	if _, err := s.For(ctx, "kata", now); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an unknown runtime: %v, want invalid argument", err)
	}
	if _, err := s.For(ctx, "crun", now); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("an unusable runtime: %v, want failed precondition", err)
	}
	if _, err := s.For(ctx, "runsc", now); !errors.Is(err, errdefs.ErrUnavailable) || runsc.probes != 1 {
		t.Errorf("a runtime being set up: %v after %d probes, want unavailable after 1", err, runsc.probes)
	}
	if _, err := s.For(ctx, "runsc", now.Add(backend.PendingProbeEvery/2)); !errors.Is(err, errdefs.ErrUnavailable) || runsc.probes != 1 {
		t.Errorf("asked again at once: %v after %d probes, want unavailable, not probed again", err, runsc.probes)
	}
	if got := s.Usable(); !slices.Equal(got, []string{"runc"}) || !s.SettingUp("runsc") || !s.SettingUp("") {
		t.Errorf("usable %v, setting up runsc %v", got, s.SettingUp("runsc"))
	}
	runsc.health = backend.Health{Name: "runsc", Usable: true}
	if be, err := s.For(ctx, "runsc", now.Add(backend.PendingProbeEvery)); err != nil || be.Name() != "runsc" {
		t.Errorf("once ready: %v, %v", be, err)
	}
	if got := s.Usable(); !slices.Equal(got, []string{"runc", "runsc"}) || s.SettingUp("") {
		t.Errorf("usable %v once runsc is ready", got)
	}

	probes := s.Probe(ctx, now)
	if len(probes) != 3 || probes[0].Name != "crun" || probes[1].Name != "runc" {
		t.Errorf("probes %+v, want crun, runc, runsc", probes)
	}
	s.Probe(ctx, now.Add(backend.ProbeEvery/2))
	if runc.probes != 1 {
		t.Errorf("runc probed %d times within ProbeEvery, want once", runc.probes)
	}
	s.Probe(ctx, now.Add(backend.ProbeEvery))
	if runc.probes != 2 {
		t.Errorf("runc probed %d times after ProbeEvery, want twice", runc.probes)
	}
}
