package surface

import (
	"sync/atomic"
	"time"
)

// wallClock is the registry's real clock. time.Now reads two clocks, the
// wall clock and the monotonic one; wallClock reads only the monotonic
// clock and adds the time elapsed to an anchor, a time.Now reading at most
// anchorPeriod old. Each clock read is tens of nanoseconds on a virtual
// machine, and registering, unregistering and invoking each take one.
//
// A result differs from time.Now only in its wall reading, and only after
// the wall clock was stepped (set by hand, or by NTP at boot): the step
// shows from the next anchor on, at most anchorPeriod later. Its monotonic
// reading is the same, so durations, deadlines and TTLs, which compare
// monotonic readings, are exact.
type wallClock struct {
	anchor atomic.Pointer[time.Time]
}

// anchorPeriod is how long an anchor serves.
const anchorPeriod = 100 * time.Millisecond

// now returns the current time.
func (c *wallClock) now() time.Time {
	if a := c.anchor.Load(); a != nil {
		// In a synctest bubble time.Since reads the bubble's clock, and a
		// real anchor is out of range there: a bubble gets its own anchor.
		if d := time.Since(*a); d >= 0 && d < anchorPeriod {
			return a.Add(d)
		}
	}
	t := time.Now()
	c.anchor.Store(&t)
	return t
}
