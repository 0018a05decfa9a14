package events

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// run runs l's writer until the test ends.
func run(t *testing.T, l *Log) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// A sandbox's changes, as the kernel tells them, are its events: the steps
// under way are not, a resume says whether it started or resumed, and a
// resume that failed is nothing.
func TestChanges(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	l := New(Config{Store: db})
	var mu sync.Mutex
	var told []string
	l.Subscribe(func(evs []*store.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			told = append(told, ev.Type)
		}
	})
	run(t, l)
	sb := &store.Sandbox{ID: "sb1", Workspace: "acme", Template: "base", Backend: "runc"}
	change := func(from, to store.State, reason, cause string) {
		s := *sb
		s.State = to
		l.Changed(hook.Change{Sandbox: &s, From: from, Reason: reason, Cause: hook.Cause{Code: cause}})
	}
	change(store.Creating, store.Running, "created", hook.CauseCreated)
	change(store.Running, store.Paused, "paused by request", hook.CauseRequest)
	change(store.Paused, store.Running, "unpaused by request", hook.CauseRequest)
	change(store.Running, store.Suspending, "idle for 1m0s", hook.CauseIdle)
	change(store.Suspending, store.Suspended, "idle for 1m0s", hook.CauseIdle)
	change(store.Suspended, store.Resuming, "woken by a call", hook.CauseWoken)
	change(store.Resuming, store.Suspended, "idle for 1m0s", hook.CauseWoken) // it failed
	change(store.Suspended, store.Resuming, "woken by a call", hook.CauseWoken)
	change(store.Resuming, store.Running, "woken by a call", hook.CauseWoken)
	change(store.Running, store.Error, "its agent (pid 9) was killed; the host's OOM killer had acted", hook.CauseOOM)
	change(store.Error, store.Resuming, "started again", hook.CauseWoken)
	change(store.Resuming, store.Running, "started again", hook.CauseWoken)
	s := *sb
	s.State = store.Deleting
	l.Changed(hook.Change{Sandbox: &s, From: store.Running, Reason: "deleted", Cause: hook.Cause{Code: hook.CauseDeleted, By: "key acme-ci"}})

	var evs []*store.Event
	for len(evs) < 8 {
		got, err := l.Wait(t.Context(), store.EventFilter{Workspace: "acme", After: int64(len(evs))})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, got...)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type+" "+ev.Reason)
	}
	want := []string{"sandbox.created created", "sandbox.paused request", "sandbox.resumed request", "sandbox.suspended idle_timeout",
		"sandbox.resumed woken", "sandbox.errored oom", "sandbox.started woken", "sandbox.deleted deleted"}
	if !slices.Equal(types, want) {
		t.Errorf("events:\n  %q\nwant\n  %q", types, want)
	}
	last := evs[len(evs)-1]
	if last.Message != "deleted (by key acme-ci)" || last.Sandbox != "sb1" || last.Data["template"] != "base" || last.Data["runtime"] != "runc" {
		t.Errorf("the delete's event: %+v", last)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(told)
		mu.Unlock()
		if n == 8 {
			break
		}
		if n > 8 || time.Now().After(deadline) {
			t.Fatalf("the subscriber was told of %d events, want 8", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A sandbox whose max lifetime ends within the notice gets one eviction
// notice; one of another node, or further from its end, gets none.
func TestEvictionNotice(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	now := time.Now().UTC().Truncate(time.Second)
	for _, sb := range []*store.Sandbox{
		{ID: "soon", Workspace: "acme", State: store.Running, Node: "here", ExpiresAt: now.Add(4 * time.Minute)},
		{ID: "later", Workspace: "acme", State: store.Running, Node: "here", ExpiresAt: now.Add(time.Hour)},
		{ID: "elsewhere", Workspace: "acme", State: store.Running, Node: "there", ExpiresAt: now.Add(time.Minute)},
	} {
		sb.CreatedAt, sb.UpdatedAt, sb.Template, sb.Backend = now, now, "base", "runc"
		if err := db.CreateSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
	}
	l := New(Config{Store: db, Node: "here"})
	run(t, l)
	l.Tick(t.Context(), now)
	l.Tick(t.Context(), now.Add(time.Second))
	evs, err := l.Wait(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a second notice would be written by now
	if more, _ := l.List(t.Context(), store.EventFilter{After: evs[len(evs)-1].ID}); len(evs)+len(more) != 1 {
		t.Fatalf("eviction notices: %+v %+v, want one", evs, more)
	}
	ev := evs[0]
	if ev.Sandbox != "soon" || ev.Type != EvictionNotice || ev.Reason != hook.CauseLifetime || ev.Data["expires_at"] != now.Add(4*time.Minute).Format(time.RFC3339) {
		t.Errorf("the notice: %+v", ev)
	}
}
