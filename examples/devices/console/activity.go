package console

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// activity is a session's audit sink and the source of the page's
// Activity card: it keeps the most recent audit records, and the reads
// (observations are never audited, so they come from the registry's
// invocation events), and tells the session when one arrives. It never
// blocks, as surface.AuditSink requires.
type activity struct {
	mu       sync.Mutex
	ring     []feedEntry
	next     int // the oldest entry, once the ring is full
	max      int
	reading  map[string]string // invocation id → consumer key, of reads in progress
	labels   []label           // the components of recent registrations, oldest first
	seq      uint64            // numbers the entries
	recorded func(surface.AuditEvent)
}

// feedEntry is one line of the feed: an audit record, or a read.
type feedEntry struct {
	surface.AuditEvent
	// read marks an entry made from invocation events, not an audit record.
	read bool
	// component names the registration's component ("devices.detail d9")
	// once its registration event told it.
	component string
	// seq numbers the entry; a new label gives it a new number, so that
	// a rendering of the entry kept under its number is of what it says.
	seq uint64
}

// newActivity keeps capacity entries; recorded is called, without locks
// held, after each audit record.
func newActivity(capacity int, recorded func(surface.AuditEvent)) *activity {
	return &activity{max: capacity, recorded: recorded} // the ring grows as entries come; reading is made on the first read
}

// Record implements surface.AuditSink; it never fails. A call that asks
// again for a decision the user has not made yet adds no line: see
// askingAgain.
func (a *activity) Record(_ context.Context, e surface.AuditEvent) error {
	if a.askingAgain(e) {
		return nil
	}
	a.mu.Lock()
	if !a.replaceReadLocked(e) {
		a.addLocked(feedEntry{AuditEvent: e})
	}
	a.mu.Unlock()
	a.recorded(e)
	return nil
}

// replaceReadLocked puts the audit record e of a read in place of the line its
// invocation events made, if they came first, and reports whether it
// did; a.mu is held. A read is audited when it fails before reaching the component (it
// was unmounted, for one): its line is shown once, from the record.
func (a *activity) replaceReadLocked(e surface.AuditEvent) bool {
	if e.Type != surface.AuditInvocationSettled || e.InvocationID == "" {
		return false
	}
	for i := range a.ring {
		if k := &a.ring[i]; k.read && k.InvocationID == e.InvocationID {
			a.seq++
			*k = feedEntry{AuditEvent: e, seq: a.seq, component: a.labelOf(e.RegistrationID)}
			return true
		}
	}
	return false
}

// askingAgain reports whether e settles a call as CONFIRMATION_REQUIRED
// again: the latest settlement of its invocation kept is one too. An
// agent waiting for the user's decision asks again and again under one
// invocation id (agentsurface call --wait polls so); the line of its
// first ask stands for all of them, and the audit trail behind the feed
// keeps every record.
func (a *activity) askingAgain(e surface.AuditEvent) bool {
	if e.Type != surface.AuditInvocationSettled || e.Code != surface.CodeConfirmationRequired || e.InvocationID == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.ring {
		// Newest first: the entry before a.next, backwards.
		k := &a.ring[(a.next-1-i+2*len(a.ring))%len(a.ring)]
		if !k.read && k.Type == surface.AuditInvocationSettled && k.InvocationID == e.InvocationID &&
			k.ConsumerID == e.ConsumerID && k.CapabilityID == e.CapabilityID {
			return k.Code == surface.CodeConfirmationRequired
		}
	}
	return false
}

func (a *activity) add(e feedEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addLocked(e)
}

func (a *activity) addLocked(e feedEntry) {
	a.seq++
	e.seq = a.seq
	if e.component == "" && e.RegistrationID != "" {
		e.component = a.labelOf(e.RegistrationID)
	}
	if len(a.ring) < a.max {
		a.ring = append(a.ring, e)
		return
	}
	a.ring[a.next] = e
	a.next = (a.next + 1) % len(a.ring)
}

// readStarted and readSettled turn the invocation events of a read into
// one feed entry.
func (a *activity) readStarted(e surface.InvocationStarted, consumerKey string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reading == nil {
		a.reading = map[string]string{}
	}
	if len(a.reading) < 1024 { // a bound; every started read settles
		a.reading[e.InvocationID] = consumerKey
	}
}

// readSettled reports whether it added a line: not for a read whose
// audit record (a read that failed before reaching the component) came
// first.
func (a *activity) readSettled(e surface.InvocationSettled) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	consumer, ok := a.reading[e.InvocationID]
	delete(a.reading, e.InvocationID)
	if !ok || slices.ContainsFunc(a.ring, func(k feedEntry) bool {
		return !k.read && k.Type == surface.AuditInvocationSettled && k.InvocationID == e.InvocationID
	}) {
		return false
	}
	d := e.DurationMs
	a.addLocked(feedEntry{read: true, AuditEvent: surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled,
		CapabilityID: e.CapabilityID, InvocationID: e.InvocationID, ConsumerID: consumer, Status: e.Status, Code: e.Code, DurationMs: &d}})
	return true
}

// label names the component of registration id on its entries, those
// kept and those to come: the registration event that carries the name
// and the audit record may come in either order.
func (a *activity) label(id, component string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.labels) >= 2*a.max { // keep those the ring refers to
		a.labels = slices.DeleteFunc(a.labels, func(l label) bool {
			return !slices.ContainsFunc(a.ring, func(e feedEntry) bool { return e.RegistrationID == l.id })
		})
	}
	a.labels = append(slices.DeleteFunc(a.labels, func(l label) bool { return l.id == id }), label{id, component})
	for i := range a.ring {
		if e := &a.ring[i]; e.RegistrationID == id && e.component == "" {
			a.seq++
			e.component, e.seq = component, a.seq
		}
	}
}

// label is the component of a registration, for its entries.
type label struct{ id, component string }

// labelOf returns the component of registration id, or ""; a.mu is
// held. (A session has few registrations at a time: a slice is smaller
// than a map, and as quick.)
func (a *activity) labelOf(id string) string {
	for i := len(a.labels) - 1; i >= 0; i-- {
		if a.labels[i].id == id {
			return a.labels[i].component
		}
	}
	return ""
}

// newestFirst returns the kept entries, newest first.
func (a *activity) newestFirst() []feedEntry {
	a.mu.Lock()
	out := make([]feedEntry, 0, len(a.ring))
	out = append(out, a.ring[a.next:]...)
	out = append(out, a.ring[:a.next]...)
	a.mu.Unlock()
	slices.Reverse(out)
	return out
}

// settled returns the settlement record of invocation id that is its
// outcome, if kept: the latest, not the CONFIRMATION_REQUIRED that a
// two-phase retry (the same invocation id) follows.
func (a *activity) settled(id string) (surface.AuditEvent, bool) {
	for _, e := range a.newestFirst() {
		if e.InvocationID == id && e.Type == surface.AuditInvocationSettled && e.Code != surface.CodeConfirmationRequired {
			return e.AuditEvent, true
		}
	}
	return surface.AuditEvent{}, false
}

// audit returns the kept audit records, newest first.
func (a *activity) audit() []surface.AuditEvent {
	var out []surface.AuditEvent
	for _, e := range a.newestFirst() {
		if !e.read {
			out = append(out, e.AuditEvent)
		}
	}
	return out
}
