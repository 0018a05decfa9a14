package core

import (
	"context"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/base/testclock"
)

// withClock starts a daemon on c: its timers run when the test calls
// tickAfter, not by themselves.
func withClock(c Clock) func(*Config) { return func(cfg *Config) { cfg.Clock = c } }

// tickAfter moves the clock by d, runs one round of the timers and waits
// for what it decided (suspends, deletes) to finish.
func (d *testDaemon) tickAfter(t *testing.T, c *testclock.Clock, by time.Duration) {
	t.Helper()
	c.Advance(by)
	d.m.tick(context.WithoutCancel(t.Context()))
	d.m.reaps.Wait()
}
