package rootfs

import (
	"slices"
	"sync"
	"testing"
)

// Observers hear of each commit and removal, in the order they
// registered, with the store usable from them; stopped, they hear no more.
func TestObserve(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	var (
		mu    sync.Mutex
		heard []string
	)
	hear := func(who string) func(string) {
		return func(name string) {
			// The store answers from an observer: its lock is not held.
			info, err := s.Info(name)
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, who+":"+name+":"+info.Version+":"+map[bool]string{true: "gone", false: "current"}[err != nil])
		}
	}
	stopFirst := s.Observe(hear("first"))
	stopSecond := s.Observe(hear("second"))
	defer stopSecond()

	v1 := build(t, s, "tools", "one")
	b, err := s.Begin("tools")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Abort(); err != nil { // a build that never commits is no change
		t.Fatal(err)
	}
	stopFirst()
	stopFirst() // stopping twice is harmless
	if err := s.Remove("other"); err == nil {
		t.Fatal("removing a template that is not there succeeded")
	}
	mu.Lock()
	got := slices.Clone(heard)
	mu.Unlock()
	want := []string{"first:tools:" + v1.Version + ":current", "second:tools:" + v1.Version + ":current"}
	if !slices.Equal(got, want) {
		t.Errorf("after a commit: heard %q, want %q", got, want)
	}
}

// A removal is heard once the template is gone from its name.
func TestObserveRemove(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	build(t, s, "tools", "one")
	var heard []string
	stop := s.Observe(func(name string) {
		_, err := s.Get(name)
		heard = append(heard, name+":"+map[bool]string{true: "gone", false: "there"}[err != nil])
	})
	defer stop()
	if err := s.Remove("tools"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"tools:gone"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}
