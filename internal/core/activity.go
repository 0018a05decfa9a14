package core

import (
	"context"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// busyCPU is the share of one CPU above which a sandbox counts as busy
// though no call or command of Hutch's runs in it: work it started in the
// background (a build, a training loop) keeps it awake, a sleeping process
// does not.
const busyCPU = 0.05

// Activity says why a sandbox counts as busy or idle, and what its idle
// timer does when.
type Activity struct {
	State       store.State
	IdleTimeout time.Duration
	IdleAction  string
	// LastActivity is the last call, command or busy moment.
	LastActivity time.Time
	// Busy says something keeps it awake now; Reasons say what, and
	// otherwise why it is not busy.
	Busy    bool
	Reasons []string
	// ActionAt is when the idle timer acts if nothing happens meanwhile;
	// zero when it will not (busy, or not running).
	ActionAt time.Time
	// Stats is what it uses now; StatsErr says why it could not be read:
	// it is not live (it is not woken to be measured), or its runtime
	// could not say.
	Stats    backend.Stats
	StatsErr error
}

// Activity reports how a sandbox is now, what keeps it busy and what it
// uses, without counting as activity and without waking it: a dashboard
// that polls it does not keep a sandbox from its idle timeout.
func (m *Manager) Activity(ctx context.Context, id string) (Activity, error) {
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return Activity{}, err
	}
	a := Activity{State: rec.State, IdleTimeout: rec.IdleTimeout, IdleAction: rec.IdleAction, LastActivity: rec.UpdatedAt}
	m.mu.Lock()
	inst := m.live[id]
	m.mu.Unlock()
	if inst == nil {
		a.StatsErr = notRunning(rec)
		switch rec.State {
		case store.Suspended, store.Suspending, store.Resuming:
			a.Reasons = []string{fmt.Sprintf("%s: nothing runs; any call wakes it", rec.State)}
		case store.Stopped, store.Stopping:
			a.Reasons = []string{fmt.Sprintf("%s: nothing runs; a start (POST …/start, hutch start) starts it, calls do not", rec.State)}
		default:
			a.Reasons = []string{fmt.Sprintf("%s: nothing runs", rec.State)}
		}
		return a, nil
	}
	a.Stats, a.StatsErr = inst.backend.Stats(ctx, inst.handle)
	now := m.clock.Now()
	inst.mu.Lock()
	a.LastActivity = inst.lastActive
	running, cpu, paused := inst.running, inst.cpuShare, inst.paused
	inst.mu.Unlock()
	if paused {
		a.Reasons = append(a.Reasons, "paused: frozen, using no CPU; any call thaws it")
	}
	if running > 0 {
		a.Reasons = append(a.Reasons, fmt.Sprintf("%d command(s) running", running))
	}
	if !paused {
		busy, errs := m.hooks.Busy(ctx, &Running{m: m, inst: inst})
		a.Reasons = append(a.Reasons, busy...)
		for _, err := range errs {
			a.Reasons = append(a.Reasons, err.Error())
		}
	}
	if cpu > busyCPU {
		a.Reasons = append(a.Reasons, fmt.Sprintf("using %.0f%% of a CPU", cpu*100))
	}
	a.Busy = len(a.Reasons) > 0 && !paused
	if !a.Busy {
		a.ActionAt = a.LastActivity.Add(a.IdleTimeout)
		a.Reasons = append(a.Reasons, fmt.Sprintf("idle for %s: no command, background process or CPU use (under %.0f%% of a CPU)",
			now.Sub(a.LastActivity).Round(time.Second), busyCPU*100))
	}
	return a, nil
}

// sampleCPU measures what share of a CPU each live sandbox used since the
// last sample; one over busyCPU counts as activity.
func (m *Manager) sampleCPU(ctx context.Context, now time.Time) {
	m.mu.Lock()
	insts := make([]*instance, 0, len(m.live))
	for _, inst := range m.live {
		insts = append(insts, inst)
	}
	m.mu.Unlock()
	for _, inst := range insts {
		used, err := cpuTime(ctx, inst)
		if err != nil {
			continue // gone meanwhile, or a runtime that cannot say
		}
		inst.mu.Lock()
		if !inst.cpuAt.IsZero() && now.After(inst.cpuAt) {
			inst.cpuShare = float64(used-inst.cpuTime) / float64(now.Sub(inst.cpuAt))
			if inst.cpuShare > busyCPU {
				inst.lastActive = now
			}
		}
		inst.cpuAt, inst.cpuTime = now, used
		inst.mu.Unlock()
	}
}

// cpuTime is the CPU time inst's sandbox has used: read alone where its
// runtime can (a file a sandbox, where Stats reads a dozen: with a
// thousand sandboxes, every second, that was a quarter of the daemon's
// CPU).
func cpuTime(ctx context.Context, inst *instance) (time.Duration, error) {
	if r := inst.backend.Capabilities().CPU; r != nil {
		return r.CPUTime(ctx, inst.handle)
	}
	st, err := inst.backend.Stats(ctx, inst.handle)
	return st.CPUTime, err
}
