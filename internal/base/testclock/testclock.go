// Package testclock is a clock tests move by hand: timers act when a test
// says time has passed, not after real sleeps.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told. It is safe for concurrent
// use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock at a fixed time, noon UTC of a day.
func New() *Clock {
	return &Clock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
