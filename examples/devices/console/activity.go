package console

import (
	"context"
	"slices"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
)

// activity is a session's audit sink: it keeps the most recent records
// for the page's activity feed and tells the page when one arrives. It
// never blocks, as surface.AuditSink requires.
type activity struct {
	mu      sync.Mutex
	ring    []surface.AuditEvent
	next    int // the oldest record, once the ring is full
	max     int
	changed func()
}

func newActivity(capacity int, changed func()) *activity {
	return &activity{max: capacity, changed: changed} // grows as records come
}

// Record implements surface.AuditSink; it never fails.
func (a *activity) Record(_ context.Context, e surface.AuditEvent) error {
	a.mu.Lock()
	if len(a.ring) < a.max {
		a.ring = append(a.ring, e)
	} else {
		a.ring[a.next] = e
		a.next = (a.next + 1) % len(a.ring)
	}
	a.mu.Unlock()
	a.changed()
	return nil
}

// newestFirst returns the kept records, newest first.
func (a *activity) newestFirst() []surface.AuditEvent {
	a.mu.Lock()
	out := make([]surface.AuditEvent, 0, len(a.ring))
	out = append(out, a.ring[a.next:]...)
	out = append(out, a.ring[:a.next]...)
	a.mu.Unlock()
	slices.Reverse(out)
	return out
}
