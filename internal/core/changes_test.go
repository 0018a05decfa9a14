package core

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/testclock"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// changes records what a hook.Changer hears.
type changes struct {
	mu  sync.Mutex
	got []string
}

func (c *changes) Name() string { return "changes" }

func (c *changes) Changed(ch hook.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, fmt.Sprintf("%s %s>%s %s%s", ch.Sandbox.ID, ch.From, ch.Sandbox.State, ch.Cause.Code, by(ch.Cause)))
}

func by(c hook.Cause) string {
	if c.By == "" {
		return ""
	}
	return " by " + c.By
}

// of returns what was heard of sandbox id, and forgets it.
func (c *changes) of(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out, rest []string
	for _, g := range c.got {
		if len(g) > len(id) && g[:len(id)+1] == id+" " {
			out = append(out, g[len(id)+1:])
		} else {
			rest = append(rest, g)
		}
	}
	c.got = rest
	return out
}

// Every change of a sandbox's state reaches the Changers with its cause:
// a caller's (as its context says), a timer's, a wake's.
func TestChangesHaveCauses(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	heard := &changes{}
	d := newDaemonState(t).start(t, withClock(clock), func(cfg *Config) { cfg.Hooks = append(cfg.Hooks, heard) })
	ctx := t.Context()
	want := func(id string, w ...string) {
		t.Helper()
		if got := heard.of(id); !slices.Equal(got, w) {
			t.Errorf("changes heard:\n  %q\nwant\n  %q", got, w)
		}
	}

	sb := d.create(t, create.Options{IdleTimeout: time.Minute})
	want(sb.ID, "creating>running created")
	if _, err := d.m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	want(sb.ID, "running>paused request", "paused>running request")
	d.tickAfter(t, clock, time.Minute)
	want(sb.ID, "running>suspending idle_timeout", "suspending>suspended idle_timeout")
	if _, _, err := d.exec(t, sb.ID, execRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	want(sb.ID, "suspended>resuming woken", "resuming>running woken")
	if _, err := d.m.Halt(ctx, sb.ID, Halt{Stop: true, Reason: "stopped by request"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.m.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	want(sb.ID, "running>stopping request", "stopping>stopped request", "stopped>resuming request", "resuming>running request")
	keyed := hook.WithCause(ctx, hook.Cause{Code: hook.CauseDeleted, By: "key acme-ci"})
	if err := d.m.deleteAndWait(keyed, sb.ID); err != nil {
		t.Fatal(err)
	}
	want(sb.ID, "running>deleting deleted by key acme-ci")

	short := d.create(t, create.Options{MaxLifetime: time.Hour, IdleTimeout: 2 * time.Hour})
	heard.of(short.ID)
	d.tickAfter(t, clock, time.Hour)
	want(short.ID, "running>deleting max_lifetime")
	if _, err := d.m.Get(ctx, short.ID); err == nil {
		t.Error("a sandbox past its max lifetime is still there")
	}
	for _, s := range []*store.Sandbox{sb, short} {
		if d.listed(t, s.ID) {
			t.Errorf("sandbox %s left in the backend", s.ID)
		}
	}
}
