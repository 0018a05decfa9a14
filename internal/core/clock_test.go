package core

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock tests move by hand: timers act when a test says
// time has passed, not after real sleeps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// withClock starts a daemon on c: its timers run when the test calls
// tickAfter, not by themselves.
func withClock(c Clock) func(*Config) { return func(cfg *Config) { cfg.Clock = c } }

// tickAfter moves the clock by d, runs one round of the timers and waits
// for what it decided (suspends, deletes) to finish.
func (d *testDaemon) tickAfter(t *testing.T, c *fakeClock, by time.Duration) {
	t.Helper()
	c.advance(by)
	d.m.tick(context.WithoutCancel(t.Context()))
	d.m.reaps.Wait()
}
