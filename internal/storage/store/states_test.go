package store

import (
	"slices"
	"testing"
)

// The table is whole: every state has its row, every change leads to a
// known state, every state can be reached from creating, and from every
// state a sandbox can be deleted, at once or after an error.
func TestTransitions(t *testing.T) {
	t.Parallel()
	all := States()
	for _, s := range all {
		if _, ok := transitions[s]; !ok {
			t.Errorf("%s has no row", s)
		}
	}
	for from, tos := range transitions {
		if !slices.Contains(all, from) {
			t.Errorf("row of unknown state %q", from)
		}
		for _, to := range tos {
			if !slices.Contains(all, to) {
				t.Errorf("%s → unknown state %q", from, to)
			}
		}
	}
	reached := map[State]bool{Creating: true}
	for queue := []State{Creating}; len(queue) > 0; queue = queue[1:] {
		for _, to := range transitions[queue[0]] {
			if !reached[to] {
				reached[to] = true
				queue = append(queue, to)
			}
		}
	}
	for _, s := range all {
		if !reached[s] {
			t.Errorf("%s cannot be reached from creating", s)
		}
		if s != Deleting && !CanChange(s, Deleting) && !(CanChange(s, Error) && CanChange(Error, Deleting)) {
			t.Errorf("a sandbox in %s can never be deleted", s)
		}
	}
}

func TestCanChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from, to State
		want     bool
	}{
		{Running, Paused, true},
		{Paused, Running, true},
		{Suspended, Resuming, true},
		{Error, Resuming, true},
		{Stopped, Running, false}, // through resuming
		{Suspending, Running, false},
		{Deleting, Running, false},
		{Creating, Paused, false},
	} {
		if got := CanChange(tc.from, tc.to); got != tc.want {
			t.Errorf("CanChange(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
