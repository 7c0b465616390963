package surface

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestWallClockReadsLikeTimeNow checks that a reading lies between two
// time.Now readings taken around it, by both its monotonic reading and its
// wall reading, and that readings never go backwards.
func TestWallClockReadsLikeTimeNow(t *testing.T) {
	var c wallClock
	prev := c.now()
	for range 1000 {
		before := time.Now()
		got := c.now()
		after := time.Now()
		if got.Before(before) || got.After(after) || got.Before(prev) {
			t.Fatalf("monotonic reading %v outside [%v, %v] or before %v", got, before, after, prev)
		}
		// Wall readings: equal up to the clock's slewing over one period.
		const slack = time.Millisecond
		if w := got.Round(0); w.Before(before.Round(0).Add(-slack)) || w.After(after.Round(0).Add(slack)) {
			t.Fatalf("wall reading %v outside [%v, %v]", w, before.Round(0), after.Round(0))
		}
		prev = got
	}
}

// TestWallClockAnchors checks when the clock takes a new anchor: never
// while the anchor is younger than anchorPeriod, always once it is older.
func TestWallClockAnchors(t *testing.T) {
	var c wallClock
	first := c.now()
	a := c.anchor.Load()
	if a == nil || !a.Equal(first) {
		t.Fatalf("the first reading is not the anchor: %v, %v", a, first)
	}
	c.now()
	if c.anchor.Load() != a {
		t.Fatal("a fresh anchor was replaced")
	}
	old := time.Now().Add(-anchorPeriod)
	c.anchor.Store(&old)
	got := c.now()
	if b := c.anchor.Load(); b == &old || !b.Equal(got) {
		t.Fatalf("an anchor %v old was kept", anchorPeriod)
	}
	// An anchor without a monotonic reading (in the future by its wall
	// reading) is replaced too.
	future := time.Now().Round(0).Add(time.Hour)
	c.anchor.Store(&future)
	if got := c.now(); got.Round(0).After(time.Now().Round(0)) || c.anchor.Load() == &future {
		t.Fatalf("a future anchor served: %v", got)
	}
}

// TestWallClockInBubble checks that in a synctest bubble the clock reads
// the bubble's time, also after serving outside it.
func TestWallClockInBubble(t *testing.T) {
	var c wallClock
	c.now()
	synctest.Test(t, func(t *testing.T) {
		if got, want := c.now(), time.Now(); !got.Equal(want) {
			t.Fatalf("in a bubble: %v, want %v", got, want)
		}
		time.Sleep(time.Second)
		if got, want := c.now(), time.Now(); !got.Equal(want) {
			t.Fatalf("after a fake second: %v, want %v", got, want)
		}
	})
	if got := c.now(); got.Round(0).Before(time.Now().Round(0).Add(-time.Second)) {
		t.Fatalf("outside the bubble again: %v", got)
	}
}
