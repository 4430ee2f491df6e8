package harness

import (
	"sync"
	"time"
)

// Clock is a settable clock for the functions: real time until Set moves
// it, so a schedule's slot can be reached without waiting for it.
type Clock struct {
	mu  sync.Mutex
	set time.Time
}

// Now is the set time, or the wall clock when none is set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set.IsZero() {
		return time.Now()
	}
	return c.set
}

// Set moves the clock to t; the zero time returns it to the wall clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.set = t
	c.mu.Unlock()
}
