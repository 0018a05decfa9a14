package oci

import "testing"

// A sandbox's memory marks call for one kill a climb: not for the
// crossings its victim made while it was being killed, nor for its memory
// coming back, but again for the next climb.
func TestKillRule(t *testing.T) {
	const mib = 1 << 20
	rule := killRule{first: 144 * mib}
	steps := []struct {
		what   string
		used   int64
		killed int64 // the usage once the kill was made, when one was
		want   bool
	}{
		{what: "below the first mark", used: 100 * mib},
		{what: "a climb past the first mark", used: 150 * mib, killed: 178 * mib, want: true},
		{what: "the victim's crossings, waiting while it was killed", used: 176 * mib},
		{what: "its memory coming back", used: 160 * mib},
		{what: "back below the first mark", used: 120 * mib},
		{what: "the next climb", used: 146 * mib, killed: 150 * mib, want: true},
		{what: "a climb past where that kill left it", used: 170 * mib, want: true},
	}
	for _, s := range steps {
		if got := rule.crossed(s.used); got != s.want {
			t.Errorf("%s (%d MiB): kill %v, want %v", s.what, s.used/mib, got, s.want)
		}
		if s.killed != 0 {
			rule.killed(s.killed)
		}
	}
}
