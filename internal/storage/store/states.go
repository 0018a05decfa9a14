// A sandbox's lifecycle: its states, and the one table of the changes
// between them. The store keeps these states, the core changes them
// (core.Manager.transition), the API shows them.

package store

import "slices"

// State is where a sandbox is in its lifecycle.
//
//	creating ─► running ⇄ paused
//	              │  ▲        │
//	              ▼  │        ▼
//	  suspending ─► suspended ─► resuming ─► running
//	  stopping   ─► stopped   ─► resuming
//	  any of running, paused, suspended, stopped, error ─► deleting ─► (gone)
//	  error: reachable from every step; its files are kept, and a start
//	         (or, like a suspended one, any call) brings it back
//
// The states ending in -ing are steps under way: only the call that holds
// the sandbox's lock sees them, or, after a crash, Recover, which finishes
// or undoes them before anything else runs.
type State string

const (
	Creating   State = "creating"
	Running    State = "running"
	Paused     State = "paused"     // frozen; any call thaws it
	Suspending State = "suspending" // on its way to suspended; a restart finishes it
	Suspended  State = "suspended"  // no memory or CPU used, files (and under gVisor memory) kept; any call resumes it
	Resuming   State = "resuming"   // on its way back; a restart suspends it again
	Stopping   State = "stopping"   // on its way to stopped; a restart finishes it
	Stopped    State = "stopped"    // processes ended, files kept; a start (not any call) starts it
	Deleting   State = "deleting"   // on its way out; a restart finishes it
	Error      State = "error"      // ended by a failure, files kept; the reason says what was seen
)

// transitions is every change of state there is: from each state, the
// states it may go to. A change not listed is a bug, refused as such.
var transitions = map[State][]State{
	Creating:   {Running, Error},
	Running:    {Paused, Suspending, Stopping, Deleting, Error},
	Paused:     {Running, Suspending, Stopping, Deleting, Error},
	Suspending: {Suspended, Error},
	Suspended:  {Resuming, Stopping, Deleting, Error},
	Resuming:   {Running, Suspended, Stopped, Error},
	Stopping:   {Stopped, Error},
	Stopped:    {Resuming, Deleting, Error},
	Error:      {Resuming, Deleting, Error},
	Deleting:   {Error},
}

// CanChange reports whether a sandbox may go from one state to another.
func CanChange(from, to State) bool { return slices.Contains(transitions[from], to) }

// States are every state, in the order of the lifecycle.
func States() []State {
	return []State{Creating, Running, Paused, Suspending, Suspended, Resuming, Stopping, Stopped, Deleting, Error}
}

// Transient says whether a state is a step under way (see State).
func Transient(s State) bool {
	return s == Creating || s == Suspending || s == Resuming || s == Stopping || s == Deleting
}

// HoldsResources says whether a sandbox in state s holds its memory and
// CPUs: running, paused, and on their way in or out. Quotas count these
// as running, and a node's report as committed.
func HoldsResources(s State) bool {
	switch s {
	case Creating, Running, Paused, Resuming, Suspending, Stopping:
		return true
	}
	return false
}
