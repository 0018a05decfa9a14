package netproxy

import (
	"slices"
	"testing"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	var h History
	h.Add(Entry{Kind: "dns", Name: "pypi.org", Allowed: true, Rule: "mode"})
	h.Add(Entry{Kind: "tcp", Protocol: "tls", Name: "pypi.org", Addr: "151.101.0.223", Port: 443, Allowed: true, Rule: "mode"})
	h.Add(Entry{Kind: "tcp", Protocol: "tcp", Addr: "203.0.113.7", Port: 22, Allowed: true, Rule: "mode"})
	h.Add(Entry{Kind: "tcp", Protocol: "tcp", Addr: "2001:db8::1", Port: 22, Allowed: true, Rule: "mode"})
	h.Add(Entry{Kind: "tcp", Name: "evil.test", Port: 80, Rule: "mode", Reason: "refused"})
	// Not learning: what the log has.
	got := h.Reached()
	slices.Sort(got)
	if want := []string{"203.0.113.7:22", "[2001:db8::1]:22", "pypi.org:443"}; !slices.Equal(got, want) {
		t.Errorf("Reached: %q, want %q (no lookups, no refusals)", got, want)
	}
	entries, cursor := h.After(3)
	if cursor != 5 || len(entries) != 2 || entries[0].Addr != "2001:db8::1" || entries[0].Time.IsZero() {
		t.Errorf("After(3): %+v, %d", entries, cursor)
	}
	// Learning: from now on, and kept past the log's end.
	h.Learning(true)
	h.Add(Entry{Kind: "tcp", Name: "registry.npmjs.org", Port: 443, Allowed: true, Rule: "mode"})
	for range maxEntries {
		h.Add(Entry{Kind: "dns", Name: "noise.test", Allowed: true, Rule: "mode"})
	}
	if got := h.Reached(); !slices.Equal(got, []string{"registry.npmjs.org:443"}) {
		t.Errorf("Reached while learning, the log long past it: %q", got)
	}
	if entries, cursor := h.After(0); len(entries) != maxEntries || cursor != 5+1+maxEntries {
		t.Errorf("the log keeps %d entries (cursor %d), want the newest %d", len(entries), cursor, maxEntries)
	}
}
