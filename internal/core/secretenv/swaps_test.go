package secretenv

import (
	"context"
	"sync"
	"testing"
)

// swapSource is a Source whose proxy secrets a test changes.
type swapSource struct {
	mu    sync.Mutex
	swaps map[string][]Swap // by workspace/user
}

func (s *swapSource) ForCommand(_ context.Context, ws, user string, _ []string) (SecretEnv, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SecretEnv{Swaps: append([]Swap(nil), s.swaps[ws+"/"+user]...)}, nil
}

func (s *swapSource) Check(context.Context, string, string, []string) error { return nil }

func (s *swapSource) set(key string, list ...Swap) {
	s.mu.Lock()
	s.swaps[key] = list
	s.mu.Unlock()
}

// The proxy's swaps follow the vault: a secret given a new value is
// swapped with it, one deleted is swapped no more, from the next lookup
// on; a placeholder no command of the sandbox got is never swapped.
func TestSwapsFollowTheSource(t *testing.T) {
	t.Parallel()
	const ph, other = "hutch-secret-KEY-000000000000000000000000", "hutch-secret-OTHER-111111111111111111111111"
	src := &swapSource{swaps: map[string][]Swap{}}
	src.set("acme/u-1", Swap{Placeholder: ph, Value: "first", Hosts: []string{"api.example.com"}})
	var sw swaps
	sw.add(src, owner{workspace: "acme", user: "u-1"}, []Swap{{Placeholder: ph}})

	value := func() string {
		got := sw.forHost("api.example.com", 443)
		if len(got) == 0 {
			return ""
		}
		return got[0].Value
	}
	if v := value(); v != "first" {
		t.Fatalf("before: %q, want first", v)
	}
	if got := sw.forHost("other.example.com", 443); len(got) != 0 {
		t.Errorf("another host: %d swaps, want none", len(got))
	}
	src.set("acme/u-1", Swap{Placeholder: ph, Value: "second", Hosts: []string{"api.example.com"}},
		Swap{Placeholder: other, Value: "never given", Hosts: []string{"api.example.com"}})
	if got := sw.forHost("api.example.com", 443); len(got) != 1 || got[0].Value != "second" {
		t.Errorf("rotated: %v, want the new value alone", got)
	}
	src.set("acme/u-1")
	if v := value(); v != "" {
		t.Errorf("deleted: %q, want nothing swapped", v)
	}
}
