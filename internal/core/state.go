package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// transition moves sandbox id from one of the states from to state to,
// saying why. It is the one way a sandbox's state changes after its
// creation: the change must be in the table, and it is stored only if the
// sandbox is still in one of from (compare and set), so a change decided
// on a stale reading fails (errdefs.ErrConflict) instead of overwriting
// another. The caller holds id's lock (see Manager.locks), except where it says
// why not.
func (m *Manager) transition(ctx context.Context, id string, to store.State, reason string, from ...store.State) error {
	return m.transitionHandle(ctx, id, nil, to, reason, from...)
}

// transitionHandle is transition that also stores the backend's new
// handle state (a create's).
func (m *Manager) transitionHandle(ctx context.Context, id string, handle []byte, to store.State, reason string, from ...store.State) error {
	for _, f := range from {
		if !store.CanChange(f, to) {
			return fmt.Errorf("sandbox %s: no change of state from %s to %s", id, f, to)
		}
	}
	change := store.StateChange{ID: id, From: from, To: to, Reason: reason, At: m.clock.Now().UTC(), Handle: handle}
	if err := m.store.ChangeState(ctx, change); err != nil {
		return err
	}
	m.log.Debug("sandbox state", attrSandbox, id, "state", to, "from", from, "reason", reason)
	var was store.State
	if len(from) == 1 {
		was = from[0]
	}
	m.changed(ctx, id, was, reason)
	return nil
}

// changed tells the Changers that sandbox id went from was ("": one of
// several) to the state its record has now, saying why: the cause ctx
// carries, or the one the change itself says.
func (m *Manager) changed(ctx context.Context, id string, was store.State, reason string) {
	if !m.hooks.Changes() {
		return
	}
	rec, err := m.store.GetSandbox(context.WithoutCancel(ctx), id)
	if err != nil {
		m.log.Warn("sandbox changed, but its record is not found: no hook hears of it", attrSandbox, id, "error", err)
		return
	}
	m.changedTo(ctx, rec, was, reason)
}

// changedTo is changed with the record after the change at hand.
func (m *Manager) changedTo(ctx context.Context, rec *store.Sandbox, was store.State, reason string) {
	cause, ok := hook.CauseOf(ctx)
	if !ok {
		cause = hook.Cause{Code: causeOf(was, rec.State, reason)}
	}
	m.hooks.Changed(hook.Change{Sandbox: view(rec), From: was, Reason: reason, Cause: cause})
}

// causeOr is ctx carrying cause code, unless it carries one already (a
// caller's, which a step it leads to keeps).
func causeOr(ctx context.Context, code string) context.Context {
	if _, ok := hook.CauseOf(ctx); ok {
		return ctx
	}
	return hook.WithCause(ctx, hook.Cause{Code: code})
}

// causeOf is the cause of a change from was to to, saying reason, that
// no caller or timer named.
func causeOf(was, to store.State, reason string) string {
	switch {
	case was == store.Creating && to == store.Running:
		return hook.CauseCreated
	case to == store.Deleting:
		return hook.CauseDeleted
	case to == store.Error && strings.Contains(reason, "OOM"):
		return hook.CauseOOM // the runtime's watch saw the OOM killer act
	case to == store.Error:
		return hook.CauseError
	}
	return hook.CauseRequest
}

// mustTransition is transition for steps that go on whatever the store
// says (the sandbox is already halted, say): a failure is logged.
func (m *Manager) mustTransition(ctx context.Context, id string, to store.State, reason string, from ...store.State) {
	if err := m.transition(ctx, id, to, reason, from...); err != nil {
		m.log.Error("record sandbox state", attrSandbox, id, "state", to, "error", err)
	}
}

// Clock tells the time; tests move a fake one (see Config.Clock).
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
